# SPDX-License-Identifier: BSD-2-Clause
# Sourced by tests/harness and tests/fabtests.
#
# shm keeps its regions in /dev/shm until the endpoint is closed, and a
# process that crashes, fails or is ended never closes it: the region then
# stands in the way of the next process that gets the same pid (fi_enable
# answers -FI_EBUSY, as it does for a region another libfabric version
# left). Pids wrap within a run of the whole suite, so a region left
# before this run counts as much as one left during it.
# clear_shm removes ours that belong to processes gone: shm names them
# PID:UID:N, and the EFA double's QKEY holds the pid (GID_QPN_QKEY_UID).
# A region shm names after an address (127.0.0.1:PORT) holds no pid: its
# owner clears it.
clear_shm() {
	local f name pid
	for f in /dev/shm/*; do
		[ -O "$f" ] || continue
		name=${f##*/}
		if [[ $name =~ ^([0-9]+):[0-9]+:[0-9]+$ ]]; then
			pid=${BASH_REMATCH[1]}
		elif [[ $name == fe80*_*_????????_* ]]; then
			pid=${name%_*}; pid=$((16#${pid##*_} >> 8))
		else
			continue
		fi
		[ -d "/proc/$pid" ] || rm -f "$f"
	done
}
