# SPDX-License-Identifier: BSD-2-Clause
# The MPI programs tests/mpi-jobs runs, built with the MPI compiler
# configure found (MPICC); without one they are not, and the test skips.
# Included by the top-level Makefile.am, so paths start at the top.
EXTRA_DIST += tests/mpi-jobs tests/mpi/p2p.c tests/mpi/rma.c
if HAVE_MPICC
check_SCRIPTS = tests/mpi/p2p tests/mpi/rma
CLEANFILES += $(check_SCRIPTS)
MPI_BUILD = $(AM_V_CC)$(MKDIR_P) tests/mpi && \
	$(MPICC) $(AM_CFLAGS) $(CFLAGS) -o $@
tests/mpi/p2p: $(srcdir)/tests/mpi/p2p.c
	$(MPI_BUILD) $(srcdir)/tests/mpi/p2p.c
tests/mpi/rma: $(srcdir)/tests/mpi/rma.c
	$(MPI_BUILD) $(srcdir)/tests/mpi/rma.c
endif
