dnl SPDX-License-Identifier: BSD-2-Clause
dnl HML_CHECK_CUDA: find cuda.h. The library never links libcuda: it opens
dnl libcuda.so.1 at run time.
AC_DEFUN([HML_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: /usr/local/cuda)])],
    [], [with_cuda=/usr/local/cuda])
  CUDA_CFLAGS="-I$with_cuda/include"
  hml_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"
  AC_CHECK_HEADER([cuda.h], [],
    [AC_MSG_ERROR([cuda.h not found in $with_cuda/include: install the CUDA toolkit or pass --with-cuda=DIR])])
  CPPFLAGS=$hml_save_CPPFLAGS
  AC_SUBST([CUDA_CFLAGS])
  dnl Tests call the driver API: link the toolkit's stub where there is one,
  dnl else the double; at run time the loader finds the real driver or the
  dnl double (tests/harness decides).
  AS_IF([test -e "$with_cuda/lib64/stubs/libcuda.so"],
    [CUDA_TEST_LIBS="-L$with_cuda/lib64/stubs -lcuda"],
    [CUDA_TEST_LIBS='$(top_builddir)/tests/doubles/cuda/.libs/libcuda.so.1'])
  AC_SUBST([CUDA_TEST_LIBS])
])
