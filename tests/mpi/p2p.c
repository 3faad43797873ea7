/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI point-to-point as MPI libraries use libfabric's tagged messages
 * (Open MPI's ofi MTL): messages to the rank's own self, probes (FI_PEEK,
 * FI_CLAIM), any-source and any-tag receives, neighbours. The cases the
 * arguments name run in that order, "ok: CASE" after each; each rank
 * checks every byte and status it gets and ends the job (MPI_Abort) on
 * the first wrong one. tests/mpi-jobs runs them without hmemloop and
 * through it.
 *
 *   self-probe     MPI_Isend to itself, MPI_Probe, MPI_Recv
 *   self-iprobe    MPI_Isend to itself, MPI_Iprobe until found, MPI_Recv
 *   self-improbe   MPI_Isend to itself, MPI_Improbe until found, MPI_Mrecv
 *   self-mprobe    MPI_Isend to itself, MPI_Mprobe, MPI_Mrecv
 *   anysource      messages from itself and its neighbour, found with
 *                  MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG), then received
 *   anyrecv        receives of MPI_ANY_SOURCE and MPI_ANY_TAG posted first,
 *                  then messages from itself and every other rank
 *   ring           MPI_Sendrecv around the ring both ways, small and large,
 *                  then nonblocking sends to and receives from every rank,
 *                  itself included, in one MPI_Waitall
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N	64		/* ints in a small message */
#define BIG	(64 << 10)	/* ints in a large one: 256 KiB */

static int rank, size;

static void check(int ok, const char *what, int from, int tag)
{
	if (ok)
		return;
	fprintf(stderr, "FAIL: rank %d: %s (from %d, tag %d)\n", rank, what,
		from, tag);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The message from rank from with tag tag: n ints of its own. */
static void fill(int *buf, int n, int from, int tag)
{
	for (int i = 0; i < n; i++)
		buf[i] = from * 1000003 + tag * 7919 + i;
}

static void expect(const int *buf, int n, int from, int tag)
{
	for (int i = 0; i < n; i++)
		check(buf[i] == from * 1000003 + tag * 7919 + i,
		      "a wrong byte", from, tag);
}

static void expect_status(const MPI_Status *st, int from, int tag, int n)
{
	int count;

	MPI_Get_count(st, MPI_INT, &count);
	check(st->MPI_SOURCE == from, "a wrong source", st->MPI_SOURCE,
	      st->MPI_TAG);
	check(st->MPI_TAG == tag, "a wrong tag", st->MPI_SOURCE, st->MPI_TAG);
	check(count == n, "a wrong count", from, tag);
}

/* ---- to itself, and probes ---------------------------------------------- */

enum probe { PROBE, IPROBE, IMPROBE, MPROBE };

static void self_probe(enum probe how)
{
	int out[N], in[N], flag = 0;
	MPI_Request rq;
	MPI_Message msg;
	MPI_Status st;

	fill(out, N, rank, 7);
	MPI_Isend(out, N, MPI_INT, rank, 7, MPI_COMM_WORLD, &rq);
	switch (how) {
	case PROBE:
		MPI_Probe(rank, 7, MPI_COMM_WORLD, &st);
		break;
	case IPROBE:
		while (!flag)
			MPI_Iprobe(rank, 7, MPI_COMM_WORLD, &flag, &st);
		break;
	case IMPROBE:
		while (!flag)
			MPI_Improbe(rank, 7, MPI_COMM_WORLD, &flag, &msg, &st);
		break;
	case MPROBE:
		MPI_Mprobe(rank, 7, MPI_COMM_WORLD, &msg, &st);
		break;
	}
	expect_status(&st, rank, 7, N);
	if (how == IMPROBE || how == MPROBE)
		MPI_Mrecv(in, N, MPI_INT, &msg, &st);
	else
		MPI_Recv(in, N, MPI_INT, rank, 7, MPI_COMM_WORLD, &st);
	expect_status(&st, rank, 7, N);
	expect(in, N, rank, 7);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
}

/* ---- any source, any tag ------------------------------------------------ */

/* From itself and from the rank before it (the same where alone). */
static void anysource(void)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	int nmsg = size > 1 ? 2 : 1, out[2][N], in[N];
	bool got[2] = { false, false };
	MPI_Request rq[2];
	MPI_Status st;

	fill(out[0], N, rank, 100 + rank);
	MPI_Isend(out[0], N, MPI_INT, rank, 100 + rank, MPI_COMM_WORLD,
		  &rq[0]);
	if (nmsg > 1) {
		fill(out[1], N, rank, 200 + rank);
		MPI_Isend(out[1], N, MPI_INT, next, 200 + rank,
			  MPI_COMM_WORLD, &rq[1]);
	}
	for (int i = 0; i < nmsg; i++) {
		int self;

		MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
		self = st.MPI_SOURCE == rank && st.MPI_TAG == 100 + rank;
		check(self || (st.MPI_SOURCE == prev &&
			       st.MPI_TAG == 200 + prev),
		      "a message from nowhere", st.MPI_SOURCE, st.MPI_TAG);
		check(!got[!self], "a message probed twice", st.MPI_SOURCE,
		      st.MPI_TAG);
		got[!self] = true;
		MPI_Recv(in, N, MPI_INT, st.MPI_SOURCE, st.MPI_TAG,
			 MPI_COMM_WORLD, &st);
		expect_status(&st, st.MPI_SOURCE, st.MPI_TAG, N);
		expect(in, N, st.MPI_SOURCE, st.MPI_TAG);
	}
	MPI_Waitall(nmsg, rq, MPI_STATUSES_IGNORE);
}

/* A message to every rank, itself included, each from a buffer of its
 * own, tag base + rank, after a receive for each rank is posted: of rank
 * i and tag base + i, or, with any, of any source and any tag, posted on
 * every rank before any message leaves. Receive i lands at in + i * N,
 * its status in st[i]; st has room for 2 * size. */
static void everyone(int base, bool any, int *in, MPI_Status *st)
{
	int *out = malloc(sizeof(int) * N * size);
	MPI_Request *rq = malloc(sizeof(*rq) * (size + size));

	check(out && rq, "out of memory", rank, base);
	for (int i = 0; i < size; i++)
		MPI_Irecv(in + i * N, N, MPI_INT, any ? MPI_ANY_SOURCE : i,
			  any ? MPI_ANY_TAG : base + i, MPI_COMM_WORLD,
			  &rq[i]);
	if (any)
		MPI_Barrier(MPI_COMM_WORLD);
	for (int i = 0; i < size; i++) {
		fill(out + i * N, N, rank, base + rank);
		MPI_Isend(out + i * N, N, MPI_INT, i, base + rank,
			  MPI_COMM_WORLD, &rq[size + i]);
	}
	MPI_Waitall(size + size, rq, st);
	free(out);
	free(rq);
}

/* A receive of any source and any tag for each rank, posted before any
 * message leaves; then a message from every rank, itself included. */
static void anyrecv(void)
{
	int *in = malloc(sizeof(int) * N * size);
	MPI_Status *st = malloc(sizeof(*st) * (size + size));
	char *seen = calloc(size, 1);

	check(in && st && seen, "out of memory", rank, 0);
	everyone(300, true, in, st);
	for (int i = 0; i < size; i++) {
		int from = st[i].MPI_SOURCE;

		check(from >= 0 && from < size && !seen[from],
		      "a source twice, or none", from, st[i].MPI_TAG);
		seen[from] = 1;
		expect_status(&st[i], from, 300 + from, N);
		expect(in + i * N, N, from, 300 + from);
	}
	free(in);
	free(st);
	free(seen);
}

/* ---- neighbours and everyone -------------------------------------------- */

static void sendrecv(int n, int dir, int tag)
{
	int to = (rank + dir + size) % size, from = (rank - dir + size) % size;
	int *out = malloc(sizeof(int) * n), *in = malloc(sizeof(int) * n);
	MPI_Status st;

	check(out && in, "out of memory", rank, tag);
	fill(out, n, rank, tag);
	MPI_Sendrecv(out, n, MPI_INT, to, tag, in, n, MPI_INT, from, tag,
		     MPI_COMM_WORLD, &st);
	expect_status(&st, from, tag, n);
	expect(in, n, from, tag);
	free(out);
	free(in);
}

static void ring(void)
{
	int *in = malloc(sizeof(int) * N * size);
	MPI_Status *st = malloc(sizeof(*st) * (size + size));

	check(in && st, "out of memory", rank, 0);
	sendrecv(N, 1, 1);
	sendrecv(N, -1, 2);
	sendrecv(BIG, 1, 3);
	sendrecv(BIG, -1, 4);
	everyone(400, false, in, st);
	for (int i = 0; i < size; i++) {
		expect_status(&st[i], i, 400 + i, N);
		expect(in + i * N, N, i, 400 + i);
	}
	free(in);
	free(st);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(void);
		enum probe how;
	} cases[] = {
		{ "self-probe", .how = PROBE },
		{ "self-iprobe", .how = IPROBE },
		{ "self-improbe", .how = IMPROBE },
		{ "self-mprobe", .how = MPROBE },
		{ "anysource", .run = anysource },
		{ "anyrecv", .run = anyrecv },
		{ "ring", .run = ring },
	};
	size_t n = sizeof(cases) / sizeof(cases[0]), i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	check(argc > 1, "usage: p2p CASE...", rank, 0);
	for (int a = 1; a < argc; a++) {
		for (i = 0; i < n && strcmp(argv[a], cases[i].name); i++)
			;
		check(i < n, "usage: p2p CASE...", rank, 0);
		if (cases[i].run)
			cases[i].run();
		else
			self_probe(cases[i].how);
		MPI_Barrier(MPI_COMM_WORLD);
		if (!rank) {
			printf("ok: %s, %d ranks\n", cases[i].name, size);
			fflush(stdout);
		}
	}
	MPI_Finalize();
	return 0;
}
