/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI one-sided communication, as Open MPI's osc rdma component does it
 * over its ofi BTL (fi_write, fi_read, fi_atomic): a window of N ints on
 * every rank, and between fences MPI_Put, MPI_Get and MPI_Accumulate to
 * the rank itself and to its neighbours. Each rank checks every int it
 * holds or fetched after each epoch and ends the job (MPI_Abort) on the
 * first wrong one. Then the same traffic point to point over the BTL
 * (MPI_Sendrecv around the ring). tests/mpi-jobs runs it without
 * hmemloop and through it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N	1024		/* ints in each rank's window */

static int rank, size;

static void check(int ok, const char *what, int i)
{
	if (ok)
		return;
	fprintf(stderr, "FAIL: rank %d: %s, int %d\n", rank, what, i);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int value(int owner, int epoch, int i)
{
	return owner * 1000003 + epoch * 7919 + i;
}

int main(int argc, char **argv)
{
	int *win_buf, *got, *mine, next, prev, half = N / 2;
	MPI_Status st;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	next = (rank + 1) % size;
	prev = (rank + size - 1) % size;
	got = malloc(sizeof(int) * N);
	mine = malloc(sizeof(int) * N);
	check(got && mine, "out of memory", 0);
	MPI_Win_allocate(sizeof(int) * N, sizeof(int), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &win_buf, &win);
	for (int i = 0; i < N; i++)
		win_buf[i] = -1;

	/* Put: the first half to itself, the second to the next rank. */
	for (int i = 0; i < N; i++)
		mine[i] = value(rank, 1, i);
	MPI_Win_fence(0, win);
	MPI_Put(mine, half, MPI_INT, rank, 0, half, MPI_INT, win);
	MPI_Put(mine + half, N - half, MPI_INT, next, half, N - half, MPI_INT,
		win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++)
		check(win_buf[i] == value(i < half ? rank : prev, 1, i),
		      "MPI_Put: a wrong int", i);

	/* Get: the whole window of the previous rank, and its own (not read
	 * directly after: the others' accumulates may be landing). */
	MPI_Get(got, N, MPI_INT, prev, 0, N, MPI_INT, win);
	MPI_Get(mine, N, MPI_INT, rank, 0, N, MPI_INT, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++) {
		check(got[i] == value(i < half ? prev : (prev + size - 1) %
				      size, 1, i), "MPI_Get: a wrong int", i);
		check(mine[i] == value(i < half ? rank : prev, 1, i),
		      "MPI_Get of its own window: a wrong int", i);
	}

	/* Accumulate: every rank adds its rank + 1 to every window. */
	for (int i = 0; i < N; i++)
		mine[i] = rank + 1;
	for (int to = 0; to < size; to++)
		MPI_Accumulate(mine, N, MPI_INT, to, 0, N, MPI_INT, MPI_SUM,
			       win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++)
		check(win_buf[i] == value(i < half ? rank : prev, 1, i) +
				    size * (size + 1) / 2,
		      "MPI_Accumulate: a wrong sum", i);
	MPI_Win_free(&win);

	/* Point to point over the same BTL. */
	for (int i = 0; i < N; i++)
		mine[i] = value(rank, 2, i);
	MPI_Sendrecv(mine, N, MPI_INT, next, 2, got, N, MPI_INT, prev, 2,
		     MPI_COMM_WORLD, &st);
	for (int i = 0; i < N; i++)
		check(got[i] == value(prev, 2, i), "MPI_Sendrecv: a wrong int",
		      i);
	free(got);
	free(mine);
	MPI_Barrier(MPI_COMM_WORLD);
	if (!rank)
		printf("ok: rma, %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
