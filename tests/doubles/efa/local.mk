# SPDX-License-Identifier: BSD-2-Clause
# EFA provider double: a libfabric DL provider named "efa" on top of shm,
# for machines without EFA, and its self-test. Included by the top-level
# Makefile.am, so paths start at the top of the tree. Run the test with
# the double on libfabric's provider path (a directory on 1.17):
#	FI_PROVIDER_PATH=tests/doubles/efa/.libs \
#		LD_LIBRARY_PATH=tests/doubles/cuda/.libs \
#		tests/doubles/efa/efa_test -p efa

check_LTLIBRARIES += tests/doubles/efa/libefa-fi.la
tests_doubles_efa_libefa_fi_la_SOURCES = \
	tests/doubles/efa/efa.h \
	tests/doubles/efa/efa_prov.c \
	tests/doubles/efa/efa_fabric.c \
	tests/doubles/efa/efa_ep.c \
	tests/doubles/efa/efa_cq.c \
	tests/doubles/efa/efa_av.c \
	tests/doubles/efa/efa_mr.c
# Only fi_prov_ini is exported (FI_EXT_INI gives it default visibility).
tests_doubles_efa_libefa_fi_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
# -rpath makes libtool build a shared tests/doubles/efa/.libs/libefa-fi.so
tests_doubles_efa_libefa_fi_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere -no-undefined
tests_doubles_efa_libefa_fi_la_LIBADD = $(LIBFABRIC_LIBS) -lpthread

check_PROGRAMS += tests/doubles/efa/efa_test
tests_doubles_efa_efa_test_SOURCES = tests/doubles/efa/efa_test.c
tests_doubles_efa_efa_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests
tests_doubles_efa_efa_test_LDADD = tests/libhmltest.la $(LIBFABRIC_LIBS) \
	$(CUDA_TEST_LIBS)
EXTRA_tests_doubles_efa_efa_test_DEPENDENCIES = tests/doubles/efa/libefa-fi.la \
	tests/doubles/cuda/libcuda.la

EXTRA_DIST += tests/doubles/efa/README.md
