/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The bug hmemloop exists for, reproduced: one process, its own address in
 * its address vector, CUDA device memory registered as ordinary memory, and
 * a transfer between two of its buffers. Without hmemloop each provider
 * fails the way measured on an H200 (../shared/notes/measurements.md); this
 * test asserts that it does, so the suite provably sees the bug. Through
 * hmemloop every transfer must deliver the right bytes instead.
 *
 * Each operation runs in a child process, since some of them crash it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN (64 * 1024)

enum op { WRITE, WRITEMSG, READ, WRITEDATA, SEND, SEND_FIRST, SENDDATA,
	  TSEND, TRUNC, NOPS };

static const char *const op_names[NOPS] = {
	"fi_write", "fi_writemsg", "fi_read", "fi_writedata",
	"fi_send into a posted fi_recv", "fi_send before fi_recv",
	"fi_senddata", "fi_tsend", "fi_send truncated",
};

static unsigned B(int o)
{
	switch (o) {
	case T_ERR_CQE: return 1;
	case T_NO_CQE: return 2;
	case T_BAD_BYTES: return 4;
	case T_POST_ERR: return 8;
	case T_CRASH: return 16;
	default: return 0;
	}
}

/* What each provider does on a GPU without hmemloop, as measured; on
 * libfabric 2.x (measured with the CUDA driver double), shm crashes on
 * every operation and rxm on every message, where 1.17 gave errors. */
static unsigned expected(enum op op)
{
	bool v2 = FI_MAJOR(fi_version()) >= 2;

	if (!strcmp(t_prov, "shm")) {
		if (!v2 && (op == WRITE || op == WRITEMSG || op == READ ||
			    op == SEND))
			return B(T_ERR_CQE);
		return B(T_CRASH) | (v2 ? 0 : B(T_ERR_CQE));
	}
	if (!strcmp(t_prov, "tcp;ofi_rxm"))
		return v2 && op >= SEND ? B(T_CRASH) :
		       B(T_ERR_CQE) | B(T_NO_CQE);
	if (!strcmp(t_prov, "sockets"))
		return B(T_NO_CQE) | B(T_CRASH);
	if (!strcmp(t_prov, "udp;ofi_rxd"))
		return B(T_CRASH) | B(T_NO_CQE);
	/* tests/doubles/efa: EFA's shm path, as shm (a crash where CMA is off). */
	if (!strcmp(t_prov, "efa"))
		return B(T_CRASH) | B(T_ERR_CQE);
	return B(T_ERR_CQE) | B(T_NO_CQE) | B(T_CRASH) | B(T_BAD_BYTES) | B(T_POST_ERR);
}

struct setup {
	struct t_fabric f;
	struct t_ep a, b;	/* a sends, b receives and is the RMA target */
	fi_addr_t dest;
	void *src, *dst;	/* device buffers */
	struct t_mr src_mr, dst_mr;
};

static int post(ssize_t ret)
{
	if (ret && ret != -FI_EAGAIN) {
		printf("post: %zd (%s)\n", ret, fi_strerror((int) -ret));
		return T_POST_ERR;
	}
	return T_OK;
}

/* Post, retrying while the provider asks to, as applications do. */
#define RETRY(cq, call) ({ ssize_t r_;					\
		while ((r_ = (call)) == -FI_EAGAIN)			\
			t_drive(cq);					\
		r_; })

/* The child's objects, closed after the outcome is reported: a provider
 * that crashes in its cleanup must not hide the outcome, and one that is
 * closed leaves nothing behind (shm's regions in /dev/shm). */
static struct setup s;

static void cleanup(void)
{
	fi_close(&s.src_mr.mr->fid);
	fi_close(&s.dst_mr.mr->fid);
	t_ep_close(&s.a);
	t_ep_close(&s.b);
	t_close(&s.f);
}

/* In the child: one operation, its outcome. */
static int run(enum op op)
{
	char *host = malloc(LEN), *back = malloc(LEN);
	int sctx, rctx, ret, err = 0;
	size_t rlen = op == TRUNC ? LEN / 2 : LEN;

	t_cuda_init();
	t_open(&s.f, NULL);
	t_ep_open(&s.a, &s.f, NULL);
	t_ep_open(&s.b, &s.f, NULL);
	s.dest = t_insert(&s.a, s.b.name);
	s.src = t_dev_alloc(LEN);
	s.dst = t_dev_alloc(LEN);
	t_fill(host, LEN, 1);
	t_dev_put(s.src, host, LEN);
	t_fill(host, LEN, 2);
	t_dev_put(s.dst, host, LEN);
	t_reg(&s.f, s.src, LEN, FI_SEND | FI_READ | FI_WRITE | FI_REMOTE_READ |
	      FI_REMOTE_WRITE, 1, &s.src_mr);
	/* Some providers' libraries (psm) catch SIGSEGV to print and exit:
	 * let a crash be one. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	t_reg(&s.f, s.dst, LEN, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ |
	      FI_READ | FI_WRITE, 2, &s.dst_mr);

	if (op == SEND || op == SENDDATA || op == TSEND || op == TRUNC) {
		ret = op == TSEND ?
			RETRY(s.b.cq, fi_trecv(s.b.ep, s.dst, rlen, s.dst_mr.desc,
				 FI_ADDR_UNSPEC, 7, 0, &rctx)) :
			RETRY(s.b.cq, fi_recv(s.b.ep, s.dst, rlen, s.dst_mr.desc,
					      FI_ADDR_UNSPEC, &rctx));
		if (post(ret))
			return T_POST_ERR;
	}
	switch (op) {
	case WRITE:
		ret = RETRY(s.a.cq, fi_write(s.a.ep, s.src, LEN, s.src_mr.desc, s.dest,
			       t_raddr(&s.f, &s.dst_mr, 0), s.dst_mr.key, &sctx));
		break;
	case WRITEMSG: {
		struct iovec iov = { s.src, LEN };
		struct fi_rma_iov riov = { t_raddr(&s.f, &s.dst_mr, 0), LEN,
					   s.dst_mr.key };
		struct fi_msg_rma msg = {
			.msg_iov = &iov, .desc = &s.src_mr.desc, .iov_count = 1,
			.addr = s.dest, .rma_iov = &riov, .rma_iov_count = 1,
			.context = &sctx,
		};
		ret = RETRY(s.a.cq, fi_writemsg(s.a.ep, &msg, FI_COMPLETION));
		break;
	}
	case READ:
		/* Read the target's bytes (seed 2) into the source buffer. */
		ret = RETRY(s.a.cq, fi_read(s.a.ep, s.src, LEN, s.src_mr.desc, s.dest,
			      t_raddr(&s.f, &s.dst_mr, 0), s.dst_mr.key, &sctx));
		break;
	case WRITEDATA:
		ret = RETRY(s.a.cq, fi_writedata(s.a.ep, s.src, LEN, s.src_mr.desc, 0x5eed,
				   s.dest, t_raddr(&s.f, &s.dst_mr, 0),
				   s.dst_mr.key, &sctx));
		break;
	case SENDDATA:
		ret = RETRY(s.a.cq, fi_senddata(s.a.ep, s.src, LEN, s.src_mr.desc, 0x5eed,
				  s.dest, &sctx));
		break;
	case TSEND:
		ret = RETRY(s.a.cq, fi_tsend(s.a.ep, s.src, LEN, s.src_mr.desc, s.dest, 7,
			       &sctx));
		break;
	default:	/* SEND, SEND_FIRST, TRUNC */
		ret = RETRY(s.a.cq, fi_send(s.a.ep, s.src, LEN, s.src_mr.desc, s.dest, &sctx));
		break;
	}
	if (post(ret))
		return T_POST_ERR;
	if (op == SEND_FIRST &&
	    post(RETRY(s.b.cq, fi_recv(s.b.ep, s.dst, LEN, s.dst_mr.desc,
				       FI_ADDR_UNSPEC, &rctx))))
		return T_POST_ERR;

	ret = t_outcome_of(s.a.cq, &sctx, NULL);
	if (ret)
		return ret;
	if (op >= SEND) {
		ret = t_outcome_of(s.b.cq, &rctx, &err);
		/* Truncation is right when reported as such. */
		if (op == TRUNC && ret == T_ERR_CQE && err == FI_ETRUNC)
			ret = T_OK;
		if (ret)
			return ret;
	}
	if (op == READ) {
		t_dev_get(back, s.src, LEN);
		return t_check(back, LEN, 2) ? T_OK : T_BAD_BYTES;
	}
	t_dev_get(back, s.dst, LEN);
	return t_check(back, rlen, 1) ? T_OK : T_BAD_BYTES;
}

/* Its own run, not cases: each operation in a child whose outcome comes
 * back on a pipe. */
static void reproduce(void)
{
	bool shim = t_shim_enabled();
	int failures = 0;

	/* Some failures are "no completion": wait 3 s for one, not 10. */
	setenv("HMEMLOOP_TEST_WAIT", "3", 0);
	for (enum op op = 0; op < NOPS; op++) {
		int st, got;
		pid_t pid;

		unsigned char outcome;
		int fds[2];

		t_assert(!pipe(fds), "pipe");
		fflush(stdout);
		pid = fork();
		t_assert(pid >= 0, "fork");
		if (!pid) {
			outcome = run(op);
			t_assert(write(fds[1], &outcome, 1) == 1, "pipe");
			cleanup();
			exit(0);
		}
		close(fds[1]);
		t_assert(waitpid(pid, &st, 0) == pid, "waitpid");
		if (read(fds[0], &outcome, 1) == 1)
			got = outcome;
		else if (WIFSIGNALED(st))
			got = T_CRASH;
		else if (WEXITSTATUS(st) == T_SKIP)
			t_skip("%s: provider or device not available", t_prov);
		else
			got = WEXITSTATUS(st);
		close(fds[0]);
		if (got == T_CRASH)
			printf("%s: killed by signal %d\n", op_names[op],
			       WTERMSIG(st));
		if (shim ? got == T_OK : (got != T_OK && (expected(op) & B(got)))) {
			t_ok("%s on %s: %s", op_names[op], t_prov,
			     t_outcome_name(got));
		} else {
			printf("FAIL: %s on %s: %s, expected %s\n", op_names[op],
			       t_prov, t_outcome_name(got),
			       shim ? "success" : "the measured failure");
			failures++;
		}
	}
	if (failures)
		exit(1);
}

static const struct t_case cases[] = {
	T_CASE("reproducer", reproduce),
};

T_MAIN(cases, .run = reproduce);
