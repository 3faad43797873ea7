# SPDX-License-Identifier: BSD-2-Clause
# make check-asan: libhmemloop and the rma, msg, wait,
# stress, fuzz and inflight tests again with AddressSanitizer and
# UndefinedBehaviorSanitizer (per-target flags, in tests/asan/), run by the
# harness through them (ASAN_T picks others among these). Any report fails
# the run: UBSan does not recover, and leaks are reported.
ASAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer -g -O1
ASAN_LD = -fsanitize=address,undefined
ASAN_T = ^(rma|msg|wait|stress|fuzz|inflight)$$
EXTRA_LTLIBRARIES += tests/asan/libhmemloop.la tests/asan/libhmltest.la
tests_asan_libhmemloop_la_SOURCES = $(libhmemloop_la_SOURCES)
tests_asan_libhmemloop_la_CFLAGS = $(libhmemloop_la_CFLAGS) $(ASAN)
tests_asan_libhmemloop_la_LDFLAGS = $(libhmemloop_la_LDFLAGS) $(ASAN_LD) -rpath /nowhere
tests_asan_libhmemloop_la_LIBADD = $(LIBS)
tests_asan_libhmltest_la_SOURCES = $(tests_libhmltest_la_SOURCES)
tests_asan_libhmltest_la_CFLAGS = $(AM_CFLAGS) $(ASAN)
asan_checks = tests/asan/rma tests/asan/msg tests/asan/wait \
	tests/asan/stress tests/asan/fuzz tests/asan/inflight
EXTRA_PROGRAMS += $(asan_checks)
ASAN_LDADD = tests/asan/libhmltest.la $(LIBFABRIC_LIBS) $(CUDA_TEST_LIBS) -lpthread
tests_asan_rma_SOURCES = $(tests_rma_SOURCES)
tests_asan_rma_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_rma_LDFLAGS = $(ASAN_LD)
tests_asan_rma_LDADD = $(ASAN_LDADD)
tests_asan_msg_SOURCES = $(tests_msg_SOURCES)
tests_asan_msg_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_msg_LDFLAGS = $(ASAN_LD)
tests_asan_msg_LDADD = $(ASAN_LDADD)
tests_asan_wait_SOURCES = $(tests_wait_SOURCES)
tests_asan_wait_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_wait_LDFLAGS = $(ASAN_LD)
tests_asan_wait_LDADD = $(ASAN_LDADD)
tests_asan_stress_SOURCES = tests/stress.c
tests_asan_stress_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_stress_LDFLAGS = $(ASAN_LD)
tests_asan_stress_LDADD = $(ASAN_LDADD)
tests_asan_fuzz_SOURCES = $(tests_fuzz_SOURCES)
tests_asan_fuzz_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_fuzz_LDFLAGS = $(ASAN_LD)
tests_asan_fuzz_LDADD = $(ASAN_LDADD)
tests_asan_inflight_SOURCES = $(tests_inflight_SOURCES)
tests_asan_inflight_CFLAGS = $(AM_CFLAGS) $(ASAN)
tests_asan_inflight_LDFLAGS = $(ASAN_LD)
tests_asan_inflight_LDADD = $(ASAN_LDADD)
tests/asan/hmemloop: contrib/hmemloop.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tests/asan && $(do_subst) -e 's|@HMEMLOOP_LIB[@]|$(abs_builddir)/tests/asan/.libs/libhmemloop.so|g' $(srcdir)/contrib/hmemloop.in >$@ && chmod +x $@
CLEANFILES += tests/asan/hmemloop
EXTRA_DIST += tests/asan.supp
# The CUDA double is the plain one: its copies are libc's, which ASan
# intercepts. The sanitizer runtime is loaded by the program, after the
# preloaded library, hence verify_asan_link_order=0.
check-asan: tests/asan/libhmemloop.la $(asan_checks) \
		tests/asan/hmemloop $(check_PROGRAMS) $(check_LTLIBRARIES)
	@HML_BUILDDIR=$(abs_builddir) HML_SRCDIR=$(abs_srcdir) \
	  HML_TESTDIR=$(abs_builddir)/tests/asan \
	  HML_WRAPPER=$(abs_builddir)/tests/asan/hmemloop T=$${T:-'$(ASAN_T)'} \
	  ASAN_OPTIONS="verify_asan_link_order=0 detect_leaks=1 fast_unwind_on_malloc=0 $${ASAN_OPTIONS:-}" \
	  LSAN_OPTIONS="suppressions=$(abs_srcdir)/tests/asan.supp $${LSAN_OPTIONS:-}" \
	  UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 $${UBSAN_OPTIONS:-}" \
	  $(SHELL) $(srcdir)/tests/harness
.PHONY: check-asan
