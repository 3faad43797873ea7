# SPDX-License-Identifier: BSD-2-Clause
# CUDA driver double: a libcuda.so.1 for machines without a GPU, and its
# self-test.  Included by the top-level Makefile.am, so paths start at the
# top of the tree.  Run the test with the double first on the library path:
#	LD_LIBRARY_PATH=tests/doubles/cuda/.libs tests/doubles/cuda/double_test

check_LTLIBRARIES += tests/doubles/cuda/libcuda.la
tests_doubles_cuda_libcuda_la_SOURCES = \
	tests/doubles/cuda/double.h \
	tests/doubles/cuda/double.c \
	tests/doubles/cuda/double_attr.c \
	tests/doubles/cuda/double_copy.c \
	tests/doubles/cuda/double_ctx.c \
	tests/doubles/cuda/double_ipc.c \
	tests/doubles/cuda/double_kernel.c \
	tests/doubles/cuda/double_mem.c \
	tests/doubles/cuda/double_proc.c \
	tests/doubles/cuda/double_stream.c \
	tests/doubles/cuda/double_vmm.c
tests_doubles_cuda_libcuda_la_CPPFLAGS = $(CUDA_CFLAGS)
# -rpath makes libtool build a shared tests/doubles/cuda/.libs/libcuda.so.1
tests_doubles_cuda_libcuda_la_LDFLAGS = -rpath /nowhere -version-info 1:0:0 -no-undefined
tests_doubles_cuda_libcuda_la_LIBADD = -lpthread

check_PROGRAMS += tests/doubles/cuda/double_test
tests_doubles_cuda_double_test_SOURCES = tests/doubles/cuda/double_test.c
tests_doubles_cuda_double_test_CPPFLAGS = $(CUDA_CFLAGS)
tests_doubles_cuda_double_test_LDADD = $(CUDA_TEST_LIBS)
# where there is no toolkit stub, CUDA_TEST_LIBS is the double itself
EXTRA_tests_doubles_cuda_double_test_DEPENDENCIES = tests/doubles/cuda/libcuda.la
