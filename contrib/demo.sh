#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# make demo: the same fi_write of device memory, without and with hmemloop.
# On the GPU where there is one, else on the CUDA driver double from tests/.
builddir=${HML_BUILDDIR:-.}
demo=$builddir/contrib/hmemloop-demo
if nvidia-smi -L >/dev/null 2>&1; then
	echo "CUDA: the GPU's driver"
else
	echo "CUDA: no GPU here, so the driver double in tests/doubles/cuda"
	LD_LIBRARY_PATH=$builddir/tests/doubles/cuda/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi

echo
echo "Without hmemloop:"
"$demo" "$@"
st=$?
[ $st -gt 128 ] && echo "crashed: signal $((st - 128))"
echo
echo "With hmemloop:"
"$builddir/contrib/hmemloop" "$demo" "$@"
