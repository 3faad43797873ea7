dnl SPDX-License-Identifier: BSD-2-Clause
dnl HML_CHECK_LIBFABRIC: find libfabric's headers and library, and say which.
dnl --with-libfabric=DIR looks in DIR/include and DIR/lib{64,}; otherwise pkg-config.
AC_DEFUN([HML_CHECK_LIBFABRIC], [
  AC_ARG_WITH([libfabric],
    [AS_HELP_STRING([--with-libfabric=DIR], [libfabric installation prefix (default: pkg-config libfabric)])])
  AS_IF([test -n "$with_libfabric" && test "$with_libfabric" != yes], [
    LIBFABRIC_CFLAGS="-I$with_libfabric/include"
    AS_IF([test -d "$with_libfabric/lib64"],
      [hml_libfabric_libdir=$with_libfabric/lib64],
      [hml_libfabric_libdir=$with_libfabric/lib])
    LIBFABRIC_LIBS="-L$hml_libfabric_libdir -lfabric"
    dnl hmemloop-check opens libfabric.so.1 as the loader finds it: first
    dnl in the one it was built for, as the programs linked with it do.
    LIBFABRIC_RPATH="-Wl,-rpath,$hml_libfabric_libdir"
  ], [
    PKG_CHECK_MODULES([LIBFABRIC], [libfabric >= 1.17], [],
      [AC_MSG_ERROR([libfabric >= 1.17 not found: install libfabric-dev or pass --with-libfabric=DIR])])
    hml_libfabric_libdir=`$PKG_CONFIG --variable=libdir libfabric`
  ])
  hml_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $LIBFABRIC_CFLAGS"
  AC_CHECK_HEADER([rdma/fabric.h], [],
    [AC_MSG_ERROR([rdma/fabric.h not found: install libfabric-dev or pass --with-libfabric=DIR])])
  dnl The release the headers are of: 1.x and 2.x differ in what they offer.
  AC_MSG_CHECKING([libfabric's version])
  AC_COMPUTE_INT([hml_fi_major], [FI_MAJOR_VERSION], [#include <rdma/fabric.h>])
  AC_COMPUTE_INT([hml_fi_minor], [FI_MINOR_VERSION], [#include <rdma/fabric.h>])
  AC_COMPUTE_INT([hml_fi_revision], [FI_REVISION_VERSION], [#include <rdma/fabric.h>])
  CPPFLAGS=$hml_save_CPPFLAGS
  HML_LIBFABRIC_VERSION=$hml_fi_major.$hml_fi_minor.$hml_fi_revision
  AC_MSG_RESULT([$HML_LIBFABRIC_VERSION, in $hml_libfabric_libdir])
  AS_IF([test "$hml_fi_major" -lt 1 || { test "$hml_fi_major" = 1 && test "$hml_fi_minor" -lt 17; }],
    [AC_MSG_ERROR([libfabric $HML_LIBFABRIC_VERSION is older than 1.17])])
  AC_SUBST([LIBFABRIC_CFLAGS])
  AC_SUBST([LIBFABRIC_LIBS])
  AC_SUBST([LIBFABRIC_RPATH])
])
