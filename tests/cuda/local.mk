# CUDA driver double: a libcuda.so.1 for machines without a GPU, and its
# self-test.  Included by the top-level Makefile.am, so paths start at the
# top of the tree.  Run the test with the double first on the library path:
#	LD_LIBRARY_PATH=tests/cuda/.libs tests/cuda/double_test

check_LTLIBRARIES += tests/cuda/libcuda.la
tests_cuda_libcuda_la_SOURCES = \
	tests/cuda/double.h \
	tests/cuda/double.c \
	tests/cuda/double_attr.c \
	tests/cuda/double_copy.c \
	tests/cuda/double_ctx.c \
	tests/cuda/double_ipc.c \
	tests/cuda/double_mem.c \
	tests/cuda/double_proc.c \
	tests/cuda/double_stream.c \
	tests/cuda/double_vmm.c
tests_cuda_libcuda_la_CPPFLAGS = $(CUDA_CFLAGS)
# -rpath makes libtool build a shared tests/cuda/.libs/libcuda.so.1
tests_cuda_libcuda_la_LDFLAGS = -rpath /nowhere -version-info 1:0:0 -no-undefined
tests_cuda_libcuda_la_LIBADD = -lpthread

check_PROGRAMS += tests/cuda/double_test
tests_cuda_double_test_SOURCES = tests/cuda/double_test.c
tests_cuda_double_test_CPPFLAGS = $(CUDA_CFLAGS)
tests_cuda_double_test_LDADD = $(CUDA_TEST_LIBS)
# where there is no toolkit stub, CUDA_TEST_LIBS is the double itself
EXTRA_tests_cuda_double_test_DEPENDENCIES = tests/cuda/libcuda.la
