# EFA provider double: a libfabric DL provider named "efa" on top of shm,
# for machines without EFA, and its self-test. Included by the top-level
# Makefile.am, so paths start at the top of the tree. Run the test with
# the double on libfabric's provider path (a directory on 1.17):
#	FI_PROVIDER_PATH=tests/efa/.libs LD_LIBRARY_PATH=tests/cuda/.libs \
#		tests/efa/efa_test -p efa

check_LTLIBRARIES += tests/efa/libefa-fi.la
tests_efa_libefa_fi_la_SOURCES = \
	tests/efa/efa.h \
	tests/efa/efa_prov.c \
	tests/efa/efa_fabric.c \
	tests/efa/efa_ep.c \
	tests/efa/efa_cq.c \
	tests/efa/efa_av.c \
	tests/efa/efa_mr.c
# Only fi_prov_ini is exported (FI_EXT_INI gives it default visibility).
tests_efa_libefa_fi_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
# -rpath makes libtool build a shared tests/efa/.libs/libefa-fi.so
tests_efa_libefa_fi_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere -no-undefined
tests_efa_libefa_fi_la_LIBADD = $(LIBFABRIC_LIBS) -lpthread

check_PROGRAMS += tests/efa/efa_test
tests_efa_efa_test_SOURCES = tests/efa/efa_test.c
tests_efa_efa_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests
tests_efa_efa_test_LDADD = tests/libhmltest.la $(LIBFABRIC_LIBS) \
	$(CUDA_TEST_LIBS)
EXTRA_tests_efa_efa_test_DEPENDENCIES = tests/efa/libefa-fi.la \
	tests/cuda/libcuda.la

EXTRA_DIST += tests/efa/README.md
