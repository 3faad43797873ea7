/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-bench --peers: what its files share. bench_peers.c is A, the
 * initiator that measures; bench_peers_side.c what both processes do, and
 * B, the target; bench_peers_report.c the tables and CSV.
 */
#ifndef HML_BENCH_PEERS_H
#define HML_BENCH_PEERS_H

#include "bench.h"

enum { OP_WRITE, OP_READ, OP_SEND, NOPS };
extern const char *const b_op_name[NOPS];

enum b_status { P_NONE, P_OK, P_UNAVAIL, P_FAILED };
extern const char *const b_status_name[];

#define B_PATHS 10			/* the providers, then the driver */
#define B_SIZES 40
/* Seconds a command of A's may take B to answer. */
#define B_CTL_TIMEOUT_S 120
/* The driver's own copy, the last path; the NIC loopback's stand-in. */
#define B_DRIVER "cuda_ipc"
#define B_TCP "tcp;ofi_rxm"

struct b_point {
	enum b_status status;
	struct b_stats lat;		/* seconds */
	double gbps;			/* GB/s, 1e9 bytes */
	char note[320];
};

struct b_peers {
	const char *paths[B_PATHS];
	int npaths;
	size_t sizes[B_SIZES];
	int nsizes;
	struct b_point res[B_PATHS][NOPS][B_SIZES];
	bool host[B_PATHS];		/* a path on host buffers, and why */
	char note[B_PATHS][400];
};

extern struct b_peers b_pr;

/* One process's side: its buffer (device memory, or host with --host),
 * registered as host memory, and a host byte for acknowledgements. */
struct side {
	struct b_fab fab;
	struct b_ep e;
	bool fabric;
	fi_addr_t peer;
	char *buf, *ack;
	struct fid_mr *mr, *ack_mr;
	uint64_t key, raddr;		/* A: B's buffer */
};

/* bench_peers_side.c: the control channel's hex (bench_child.c: its
 * lines) */
/* n bytes as hex ("-" for none) into out; back into p. */
void b_hex_put(char *out, const void *p, size_t n);
size_t b_hex_get(void *p, size_t max, const char *hex);

/* ... the buffers */
char *b_buf_alloc(size_t len);
void b_buf_free(char *buf);
int b_fill(char *buf, int v, size_t len);
/* Are the first len bytes of buf all v? */
bool b_holds(const char *buf, int v, size_t len);

/* ... the fabric: a context per operation, never reused while it can be
 * outstanding; posts retried while -FI_EAGAIN. */
void *b_ctx(void);
int b_post_recv(struct side *s, char *buf, struct fid_mr *mr, size_t len);
int b_post_send(struct side *s, char *buf, struct fid_mr *mr, size_t len);
/* -FI_ENODATA where the provider is not here. */
int b_side_open(struct side *s, const char *prov, size_t len);
void b_side_close(struct side *s);

/* bench_peers_report.c */
void b_peers_report(void);
void b_peers_csv(const char *path);

#endif
