dnl HML_CHECK_LIBFABRIC: find libfabric's headers and library.
dnl --with-libfabric=DIR looks in DIR/include and DIR/lib{64,}; otherwise pkg-config.
AC_DEFUN([HML_CHECK_LIBFABRIC], [
  AC_ARG_WITH([libfabric],
    [AS_HELP_STRING([--with-libfabric=DIR], [libfabric installation prefix (default: pkg-config libfabric)])])
  AS_IF([test -n "$with_libfabric" && test "$with_libfabric" != yes], [
    LIBFABRIC_CFLAGS="-I$with_libfabric/include"
    AS_IF([test -d "$with_libfabric/lib64"],
      [LIBFABRIC_LIBS="-L$with_libfabric/lib64 -lfabric"],
      [LIBFABRIC_LIBS="-L$with_libfabric/lib -lfabric"])
  ], [
    PKG_CHECK_MODULES([LIBFABRIC], [libfabric >= 1.17], [],
      [AC_MSG_ERROR([libfabric >= 1.17 not found: install libfabric-dev or pass --with-libfabric=DIR])])
  ])
  hml_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $LIBFABRIC_CFLAGS"
  AC_CHECK_HEADER([rdma/fabric.h], [],
    [AC_MSG_ERROR([rdma/fabric.h not found: install libfabric-dev or pass --with-libfabric=DIR])])
  CPPFLAGS=$hml_save_CPPFLAGS
  AC_SUBST([LIBFABRIC_CFLAGS])
  AC_SUBST([LIBFABRIC_LIBS])
])
