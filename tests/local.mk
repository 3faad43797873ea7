# SPDX-License-Identifier: BSD-2-Clause
# Test programs, the harness and its list. tests/TESTS says how each runs.
check_LTLIBRARIES += tests/libhmltest.la
tests_libhmltest_la_SOURCES = tests/common.c tests/fixture.c \
	tests/progress.c tests/trace.c tests/cases.c tests/env.c \
	tests/hmltest.h
LDADD = tests/libhmltest.la $(LIBFABRIC_LIBS) $(CUDA_TEST_LIBS)

check_PROGRAMS += tests/passthrough tests/tables tests/dlopen tests/oldabi \
	tests/reproducer tests/closeorder tests/rma tests/msg tests/multigpu \
	tests/wait tests/stress tests/regressions tests/idle tests/early \
	tests/overflow tests/fork tests/dlsym tests/reset tests/hmem \
	tests/threading tests/peers tests/exact tests/fuzz tests/bounds \
	tests/statsrun tests/async tests/inflight tests/order tests/names tests/peek \
	tests/held
tests_rma_SOURCES = tests/rma.c tests/rma_core.c tests/rma_cases.c \
	tests/rma_threads.c tests/rma.h
tests_rma_LDADD = $(LDADD) -lpthread
tests_msg_SOURCES = tests/msg.c tests/msg_calls.c tests/msg_race.c \
	tests/msg_rx.c tests/msg.h
tests_fuzz_SOURCES = tests/fuzz.c tests/fuzz_seq.c tests/fuzz_known.c \
	tests/fuzz.h
tests_multigpu_LDADD = $(LDADD) -lpthread
tests_wait_SOURCES = tests/wait.c tests/wait_fx.c tests/wait_sread.c \
	tests/wait_fd.c tests/wait_cntr.c tests/wait_err.c tests/wait_sets.c \
	tests/wait_tracked.c tests/wait.h
tests_wait_LDADD = $(LDADD) -lpthread
tests_statsrun_LDADD = $(LDADD) -lpthread
tests_async_SOURCES = tests/async.c tests/async_fx.c tests/async_wait.c \
	tests/async.h
tests_async_LDADD = $(LDADD) -lpthread
tests_inflight_SOURCES = tests/inflight.c tests/inflight_close.c \
	tests/async_fx.c tests/async.h
tests_inflight_LDADD = $(LDADD) -lpthread
tests_stress_LDADD = $(LDADD) -lpthread
tests_held_LDADD = $(LDADD) -lpthread
tests_tables_SOURCES = tests/tables_main.c tests/tables.c
tests_dlopen_LDADD = $(LIBS)
tests_dlsym_LDADD = $(LIBS)
tests_hmem_LDADD = $(LDADD) -ldl

# tests/tables.c again, as a plugin that tests/dlopen opens RTLD_LOCAL.
check_LTLIBRARIES += tests/libtables.la
tests_libtables_la_SOURCES = tests/tables.c
tests_libtables_la_CFLAGS = $(AM_CFLAGS)
tests_libtables_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_libtables_la_LIBADD = $(LDADD)

EXTRA_DIST += tests/README.md tests/harness tests/TESTS tests/pingpong tests/enable-tables \
	tests/config tests/closeorder-clean tests/check \
	tests/settings tests/man tests/layering tests/stats \
	tests/shm-clean tests/holdoff

check-local: $(check_PROGRAMS) $(check_LTLIBRARIES) $(check_SCRIPTS) \
		contrib/hmemloop $(lib_LTLIBRARIES)
	@HML_BUILDDIR=$(abs_builddir) HML_SRCDIR=$(abs_srcdir) \
		$(SHELL) $(srcdir)/tests/harness

# The differential fuzzer alone, FUZZ_MINUTES (default 5) in all, shared
# among the providers tests/TESTS names for it, from a seed of the clock
# (printed).
FUZZ_MINUTES = 5
fuzz: $(check_PROGRAMS) $(check_LTLIBRARIES) contrib/hmemloop $(lib_LTLIBRARIES)
	@n=$$(awk '$$2 == "fuzz" { print NF - 2 }' $(srcdir)/tests/TESTS); \
	s=$$(( $(FUZZ_MINUTES) * 60 / n )); \
	HML_BUILDDIR=$(abs_builddir) HML_SRCDIR=$(abs_srcdir) T='^fuzz$$' \
	HMEMLOOP_FUZZ_SECONDS=$$s \
	HMEMLOOP_FUZZ_SEED=$${HMEMLOOP_FUZZ_SEED:-$$(date +%s)} \
	HMEMLOOP_TEST_TIMEOUT=$$(( s + 120 )) $(SHELL) $(srcdir)/tests/harness
.PHONY: fuzz

# The suite against the GPU's own driver, failing where there is none.
check-gpu:
	HMEMLOOP_TEST_CUDA=real $(MAKE) $(AM_MAKEFLAGS) check
.PHONY: check-gpu

clean-local:
	rm -rf tests/logs

EXTRA_DIST += tests/bench-smoke tests/hmem-hints

# libfabric's own fabtests, without hmemloop and through it: FABTESTS=DIR
# is a fabtests install prefix, built outside this tree (README, Tests);
# FABTESTS_LIBFABRIC=DIR the libfabric to run it against.
check-fabtests: contrib/hmemloop $(lib_LTLIBRARIES)
	@HML_BUILDDIR=$(abs_builddir) HML_SRCDIR=$(abs_srcdir) \
		FABTESTS=$(FABTESTS) FABTESTS_LIBFABRIC=$(FABTESTS_LIBFABRIC) \
		bash $(srcdir)/tests/fabtests
.PHONY: check-fabtests

EXTRA_DIST += tests/fabtests tests/shm.sh
