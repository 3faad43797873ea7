# SPDX-License-Identifier: BSD-2-Clause
# make check-tsan: libhmemloop, the CUDA double and tests/stress again with
# ThreadSanitizer (per-target flags, in tests/tsan/); the stress test through
# them. tests/tsan.supp says what is suppressed and why.
TSAN = -fsanitize=thread -g -O1
EXTRA_LTLIBRARIES = tests/tsan/libhmemloop.la tests/tsan/libcuda.la tests/tsan/libhmltest.la
tests_tsan_libhmemloop_la_SOURCES = $(libhmemloop_la_SOURCES)
tests_tsan_libhmemloop_la_CFLAGS = $(libhmemloop_la_CFLAGS) $(TSAN)
tests_tsan_libhmemloop_la_LDFLAGS = $(libhmemloop_la_LDFLAGS) -fsanitize=thread -rpath /nowhere
tests_tsan_libhmemloop_la_LIBADD = $(LIBS)
tests_tsan_libcuda_la_SOURCES = $(tests_doubles_cuda_libcuda_la_SOURCES)
tests_tsan_libcuda_la_CPPFLAGS = $(CUDA_CFLAGS)
tests_tsan_libcuda_la_CFLAGS = $(AM_CFLAGS) $(TSAN)
tests_tsan_libcuda_la_LDFLAGS = $(tests_doubles_cuda_libcuda_la_LDFLAGS) -fsanitize=thread
tests_tsan_libcuda_la_LIBADD = -lpthread
tests_tsan_libhmltest_la_SOURCES = $(tests_libhmltest_la_SOURCES)
tests_tsan_libhmltest_la_CFLAGS = $(AM_CFLAGS) $(TSAN)
EXTRA_PROGRAMS += tests/tsan/stress
tests_tsan_stress_SOURCES = tests/stress.c
tests_tsan_stress_CFLAGS = $(AM_CFLAGS) $(TSAN)
tests_tsan_stress_LDFLAGS = -fsanitize=thread
tests_tsan_stress_LDADD = tests/tsan/libhmltest.la $(LIBFABRIC_LIBS) $(CUDA_TEST_LIBS) -lpthread
tests/tsan/hmemloop: contrib/hmemloop.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tests/tsan && $(do_subst) -e 's|@HMEMLOOP_LIB[@]|$(abs_builddir)/tests/tsan/.libs/libhmemloop.so|g' $(srcdir)/contrib/hmemloop.in >$@ && chmod +x $@
CLEANFILES += tests/tsan/hmemloop $(EXTRA_LTLIBRARIES)
EXTRA_DIST += tests/tsan.supp
check-tsan: tests/tsan/libhmemloop.la tests/tsan/libcuda.la tests/tsan/stress tests/tsan/hmemloop
	@for p in shm 'tcp;ofi_rxm'; do echo "check-tsan: tests/stress -p $$p"; \
	  TSAN_OPTIONS="suppressions=$(abs_srcdir)/tests/tsan.supp exitcode=66 $${TSAN_OPTIONS:-}" \
	  LD_LIBRARY_PATH=$(abs_builddir)/tests/tsan/.libs HMEMLOOP_STRESS_OPS=$${HMEMLOOP_STRESS_OPS:-20000} \
	  tests/tsan/hmemloop tests/tsan/stress -p "$$p" || exit 1; done
.PHONY: check-tsan
