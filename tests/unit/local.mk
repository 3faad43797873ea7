# SPDX-License-Identifier: BSD-2-Clause
# Unit tests: internal pieces of the shim, linked from a convenience
# library of its sources, with no preload and no provider (libfabric is
# linked for fi_strerror). Included by the top-level Makefile.am, so paths
# start at the top of the tree.
check_LTLIBRARIES += tests/unit/libhmlcore.la
tests_unit_libhmlcore_la_SOURCES = $(libhmemloop_la_SOURCES)
# Flags of its own, so that its objects are not contrib/hmemloop-check's.
tests_unit_libhmlcore_la_CFLAGS = $(AM_CFLAGS)

unit_checks = tests/unit/mrmap tests/unit/avcache tests/unit/cqerr \
	tests/unit/config tests/unit/route tests/unit/match \
	tests/unit/takeback tests/unit/hold tests/unit/inflight \
	tests/unit/copy tests/unit/twin
check_PROGRAMS += $(unit_checks)
UNIT_LDADD = tests/unit/libhmlcore.la $(LIBFABRIC_LIBS) $(LIBS) -lpthread
tests_unit_mrmap_SOURCES = tests/unit/mrmap.c tests/unit/unit.h
tests_unit_mrmap_LDADD = $(UNIT_LDADD)
tests_unit_avcache_SOURCES = tests/unit/avcache.c tests/unit/unit.h
tests_unit_avcache_LDADD = $(UNIT_LDADD)
tests_unit_cqerr_SOURCES = tests/unit/cqerr.c tests/unit/unit.h
tests_unit_cqerr_LDADD = $(UNIT_LDADD)
tests_unit_config_SOURCES = tests/unit/config.c tests/unit/unit.h
tests_unit_config_LDADD = $(UNIT_LDADD)
tests_unit_route_SOURCES = tests/unit/route.c tests/unit/unit.h
tests_unit_route_LDADD = $(UNIT_LDADD)
# The fake provider (its receives, fi_cancel and CQ) the tests drive.
FAKE_PROV = tests/unit/fake_prov.c tests/unit/fake_prov.h tests/unit/unit.h
tests_unit_match_SOURCES = tests/unit/match.c $(FAKE_PROV)
tests_unit_match_LDADD = $(UNIT_LDADD)
tests_unit_takeback_SOURCES = tests/unit/takeback.c $(FAKE_PROV)
tests_unit_takeback_LDADD = $(UNIT_LDADD)
tests_unit_hold_SOURCES = tests/unit/hold.c $(FAKE_PROV)
tests_unit_hold_LDADD = $(UNIT_LDADD)
tests_unit_inflight_SOURCES = tests/unit/inflight.c $(FAKE_PROV)
tests_unit_inflight_LDADD = $(UNIT_LDADD)
tests_unit_copy_SOURCES = tests/unit/copy.c tests/unit/unit.h
tests_unit_copy_LDADD = $(UNIT_LDADD)
tests_unit_twin_SOURCES = tests/unit/twin.c tests/unit/unit.h
tests_unit_twin_LDADD = $(UNIT_LDADD)
