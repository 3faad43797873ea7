/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The router (route.c): every data operation, RMA or message, host or
 * device, is decided in one place, from what is known of it (struct
 * hml_facts), and run through one pipeline: judge its buffers, decide,
 * take the places its entries need, move its bytes, complete it.
 *
 * The rule (README, "One engine per pair"): an operation whose target is
 * an endpoint of this process is hmemloop's, host memory as well as
 * device memory, so that every operation between two endpoints of this
 * process goes through one engine and keeps the order the endpoint
 * grants. The exceptions are whole endpoints or receive queues, not
 * single operations: an endpoint that forbade CUDA calls, a receive queue
 * hmemloop does not record, one whose receives the provider may hold
 * unseen (early receives). Operations of those go to the provider after
 * hmemloop's in flight from the same initiator.
 */
#ifndef HML_ROUTE_H
#define HML_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Whose an operation is. */
enum hml_route {
	HML_JUDGE,	/* not known until its buffers are classified */
	HML_PROVIDER,	/* the provider's, unchanged */
	HML_BOUNCE,	/* the provider's, with a host copy of the payload
			 * hmemloop makes */
	HML_HERE,	/* hmemloop's: its bytes, its completions */
	HML_REFUSE,	/* refused at the call with an error; nothing moves */
};

/* Why: the logs and HMEMLOOP_STATS say it. */
enum hml_reason {
	HML_WHY_REMOTE,		/* not an endpoint of this process */
	HML_WHY_FORBIDDEN,	/* an endpoint forbade CUDA calls */
	HML_WHY_UNTRACKED,	/* the receiver's receives are not recorded,
				 * or the provider cannot give them back */
	HML_WHY_EARLY,		/* the provider may hold the match: receives
				 * posted before the endpoint was known, or
				 * messages it carried */
	HML_WHY_MANY,		/* more buffers than hmemloop takes */
	HML_WHY_OVERSIZE,	/* a host inject over inject_size, which the
				 * provider answers by its size */
	HML_WHY_DEVICE,		/* device memory */
	HML_WHY_PAIR,		/* host memory between endpoints of this
				 * process: one engine per pair */
	HML_WHY_INVALID,	/* arguments no operation can have */
	HML_WHY_DEVICE_INJECT,	/* a device inject over inject_size */
	HML_REASONS
};

struct hml_facts {
	bool local;		/* the target is an endpoint of this process */
	bool forbidden;		/* an endpoint forbade CUDA calls */
	bool msg;		/* a message */
	bool untracked;		/* message: its receiver's receives are not
				 * recorded, or cannot be taken back */
	bool early;		/* message: the provider may hold its match */
	bool many;		/* more buffers than hmemloop takes */
	/* Known once judged: */
	bool judged;
	int err;		/* classifying the buffers: -FI_E*, or 0 */
	bool device;		/* a buffer is device memory */
	bool inject;		/* an inject (a call or FI_INJECT) */
	size_t len;		/* the initiator's bytes */
	size_t inject_size;	/* the initiator's */
};

struct hml_way {
	enum hml_route route;
	enum hml_reason reason;
};

struct hml_way hml_route(const struct hml_facts *f);
const char *hml_reason_name(enum hml_reason r);

/* rma.c and send.c: the calls, installed in an endpoint's tables */
struct fi_ops_rma;
struct fi_ops_msg;
struct fi_ops_tagged;
void hml_rma_ops(struct fi_ops_rma *ops);
void hml_send_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged);

/* route.c: an operation of e to t, an endpoint of this process. False when
 * it is done here or refused, *ret the call's answer; true when it is the
 * provider's, which the caller then calls. kind: enum hml_kind. */
struct hml_ep;
struct fi_msg_rma;
struct fi_msg_tagged;
bool hml_run_rma(struct hml_ep *e, struct hml_ep *t,
		 const struct fi_msg_rma *msg, uint64_t flags, int kind,
		 bool inject, ssize_t *ret);
bool hml_run_send(struct hml_ep *e, struct hml_ep *t,
		  const struct fi_msg_tagged *m, uint64_t flags, bool tagged,
		  bool inject, ssize_t *ret);

#endif
