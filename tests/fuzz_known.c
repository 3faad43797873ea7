/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one place where the fuzzer is told what not to ask: each line the
 * providers it holds for (parts of their names, "|" between them, "" for
 * every one), the features their sequences leave out, what their reports
 * leave out, and why. efa is the EFA double of tests/doubles/efa, on shm.
 * A reason is the provider's own fault (nondeterminism, a bug of the
 * provider alone) or a difference that README's Limits states; one marked
 * "hmemloop bug" is still open.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

enum { BOTH, HOST, DEVICE };	/* which sequences leave them out */

static const struct {
	const char *prov;
	int where;
	unsigned features;	/* left out of the sequences */
	unsigned ignore;	/* left out of the reports */
	const char *why;
} known[] = {
	{ "", BOTH, FZ_BAD_ADDR, 0,
	  "a transmit to FI_ADDR_NOTAVAIL or an AV index never inserted is "
	  "undefined in libfabric: shm and rxm alone crash in their address "
	  "lookup" },
	{ "shm|efa|rxm", BOTH, FZ_IOV_OVER, 0,
	  "shm and tcp;ofi_rxm (1.17) do not check iov_limit: iov_limit + 1 "
	  "entries overflow shm's stack array (fortify aborts), and crash "
	  "rxm's fi_recvmsg" },
	{ "", HOST, 0, FZ_IGN_TX_LEN,
	  "the len of a transmit entry is undefined in libfabric (valid for "
	  "receives): shm alone reports 0, hmemloop the length" },
	{ "", HOST, FZ_WRAP, 0,
	  "hmemloop refuses iov lengths whose sum wraps 2^64 with -FI_EINVAL "
	  "(issue 15, 6); shm alone accepts such a send and completes its "
	  "receive with a negative err" },
	{ "shm|efa", HOST, FZ_BAD_RMA, 0,
	  "shm's RMA (FI_MR_VIRT_ADDR, 1.17) checks neither keys, bounds nor "
	  "rights: a write past a region's end, with a random key or a closed "
	  "region's, or to a region without FI_REMOTE_WRITE, completes and "
	  "writes where the address points; hmemloop refuses each (README)" },
	{ "shm|efa", HOST, FZ_UNEXPECTED, 0,
	  "messages with no receive posted: shm alone pushes the sender back "
	  "(-FI_EAGAIN) after its own count, hmemloop after the receiver's "
	  "rx_size (README, Limits)" },
	{ "shm|efa", HOST, FZ_SELECTIVE, 0,
	  "shm (1.17) alone completes every receive on an endpoint bound with "
	  "FI_SELECTIVE_COMPLETION, FI_COMPLETION or not (its rx op_flags "
	  "are empty); hmemloop reports one only with FI_COMPLETION" },
	{ "shm|efa", HOST, FZ_IGNORE, 0,
	  "shm (1.17) alone does not give a waiting tagged message to a "
	  "receive whose ignore bits cover the difference (seed 12: a "
	  "message of tag 1, then a receive of tag 3 ignore 2, which ends "
	  "cancelled, unfilled); hmemloop matches as libfabric defines" },
	{ "shm|efa", HOST, FZ_TRUNC, 0,
	  "shm (1.17) alone ends a truncated receive with err -FI_ETRUNC "
	  "(negative), len and olen 0, and counts no error; hmemloop reports "
	  "FI_ETRUNC with len and olen as libfabric documents" },
	{ "shm|efa", DEVICE, FZ_DELIVERY, 0,
	  "shm (1.17) alone never completes a zero-length fi_writemsg with "
	  "FI_DELIVERY_COMPLETE to a closed region's key (seed 4); hmemloop "
	  "leaves a zero-length operation, which names no memory, to it" },
	{ "rxm", BOTH, FZ_BAD_RMA, 0,
	  "tcp;ofi_rxm alone answers an RMA with a bad key, range or right by "
	  "dropping the connection: that op and the next ones to the peer end "
	  "FI_ECANCELED or FI_ENOTCONN; hmemloop fails the op alone, "
	  "FI_EINVAL or FI_EACCES (README), but leaves a zero-length one, "
	  "which names no memory, to rxm, and on device memory too the "
	  "connection drops (seed 32)" },
	{ "rxm|shm|efa", HOST, 0, FZ_IGN_REMOTE,
	  "a remote write's entry: tcp;ofi_rxm alone reports it without "
	  "FI_RMA, shm on 2.1 with FI_REMOTE_CQ_DATA alone, both with len 0; "
	  "hmemloop as shm 1.17 (FI_REMOTE_WRITE, FI_RMA, the length "
	  "written)" },
	{ "rxm", HOST, FZ_TRUNC, 0,
	  "tcp;ofi_rxm alone reports a truncated receive with len and olen of "
	  "its own (0, or the message's length), and drops the connection "
	  "after a truncated rendezvous message (FI_ENOTCONN on the next "
	  "ops)" },
	{ "shm|efa", BOTH, 0, 0,
	  "shm (2.1) crashes closing an endpoint that holds messages no "
	  "receive took (smr_discard, from util_srx_close): every sequence "
	  "ends taking them with receives of its own (the sink's)" },
	{ "sockets", HOST, FZ_BAD_RMA | FZ_TRUNC | FZ_MSG_DATA, FZ_IGN_FLAGS,
	  "sockets alone fails an RMA with a bad key FI_EACCES (hmemloop: "
	  "FI_EINVAL, README) in error entries with internal flag bits "
	  "(0x3000000000000000), data and tag of their own; sets FI_MSG "
	  "beside FI_TAGGED, and FI_REMOTE_CQ_DATA on transmit entries; "
	  "reports a truncated receive with len the message's length; and "
	  "sends no data for FI_REMOTE_CQ_DATA in fi_sendmsg's flags" },
	{ "shm|efa", HOST, FZ_DELIVERY, 0,
	  "shm alone completes a send with FI_DELIVERY_COMPLETE only once a "
	  "receive takes the message (seed 5); fi_cq(3) lets a message the "
	  "peer buffers complete, as tcp;ofi_rxm, sockets and udp;ofi_rxd "
	  "alone and hmemloop's staged messages do (README, Limits)" },
};

/* Whether entry i names prov: "" every provider, else names a part of
 * prov's name, "|" between them. */
static bool applies(size_t i, const char *prov, bool device)
{
	const char *p = known[i].prov;
	bool named = !*p;

	while (*p && !named) {
		size_t n = strcspn(p, "|");
		char name[32];

		snprintf(name, sizeof(name), "%.*s", (int) n, p);
		named = strstr(prov, name);
		p += n + !!p[n];
	}
	return named && known[i].where != (device ? HOST : DEVICE);
}

unsigned fz_features(const char *prov, bool device)
{
	unsigned f = FZ_ALL;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (applies(i, prov, device))
			f &= ~known[i].features;
	return f;
}

unsigned fz_ignored(const char *prov, bool device)
{
	unsigned f = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (applies(i, prov, device))
			f |= known[i].ignore;
	return f;
}

void fz_print_known(void)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		printf("known: %s%s: features %#x left out, report %#x: %s\n",
		       *known[i].prov ? known[i].prov : "every provider",
		       known[i].where == HOST ? " (host memory)" :
		       known[i].where == DEVICE ? " (device memory)" : "",
		       known[i].features, known[i].ignore, known[i].why);
}
