dnl SPDX-License-Identifier: BSD-2-Clause
dnl HML_CHECK_MPI: an MPI C compiler (MPICC, default mpicc where found) for
dnl the programs tests/mpi-jobs runs. Optional: without one they are not
dnl built and tests/mpi-jobs skips, saying so.
AC_DEFUN([HML_CHECK_MPI], [
  AC_ARG_VAR([MPICC], [MPI C compiler for the MPI client tests (default: mpicc, where found)])
  AC_CHECK_PROGS([MPICC], [mpicc])
  AS_IF([test -n "$MPICC"], [
    AC_MSG_CHECKING([whether $MPICC links an MPI program])
    hml_save_CC=$CC
    CC=$MPICC
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
        [[MPI_Init(0, 0); return MPI_Finalize();]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no: the MPI client tests will skip]); MPICC=])
    CC=$hml_save_CC])
  AM_CONDITIONAL([HAVE_MPICC], [test -n "$MPICC"])
])
