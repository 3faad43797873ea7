/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/fuzz: the differential fuzzer (fuzz.c drives, fuzz_seq.c runs a
 * sequence, fuzz_known.c says what each provider is not asked). */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stdint.h>

/* What a sequence may contain; a provider's known faults take some out. */
enum fz_feature {
	FZ_NULL_DESC	= 1 << 0,	/* NULL descriptors */
	FZ_BAD_ADDR	= 1 << 1,	/* FI_ADDR_UNSPEC, _NOTAVAIL, never inserted */
	FZ_WRAP		= 1 << 2,	/* iov lengths whose sum wraps 2^64 */
	FZ_IOV_OVER	= 1 << 3,	/* iov count 0 and iov_limit + 1 */
	FZ_BAD_KEY	= 1 << 4,	/* random keys, keys of closed regions */
	FZ_OOB		= 1 << 5,	/* remote ranges past a region, near 2^64 */
	FZ_CANCEL	= 1 << 6,	/* fi_cancel of anything */
	FZ_CLOSE_MR	= 1 << 7,	/* regions closed mid-sequence */
	FZ_UNEXPECTED	= 1 << 8,	/* sends before their receive */
	FZ_TRUNC	= 1 << 9,	/* receives shorter than the message */
	FZ_SELECTIVE	= 1 << 10,	/* FI_SELECTIVE_COMPLETION endpoints */
	FZ_CQ_FORMATS	= 1 << 11,	/* CQ formats other than tagged */
	FZ_SHARED_CTX	= 1 << 12,	/* receives sharing a context */
	FZ_HUGE_OFF	= 1 << 13,	/* remote offsets near 2^64 */
	FZ_RIGHTS	= 1 << 14,	/* writes to a region without FI_REMOTE_WRITE */
	FZ_DELIVERY	= 1 << 15,	/* FI_DELIVERY_COMPLETE sends */
	FZ_MSG_DATA	= 1 << 16,	/* FI_REMOTE_CQ_DATA in *msg flags */
	FZ_INJECT_WAITS	= 1 << 17,	/* injects no receive is posted for */
	FZ_IGNORE	= 1 << 18,	/* receives with tag ignore bits */
	FZ_ALL		= (1 << 19) - 1,
	/* RMA that a provider must refuse */
	FZ_BAD_RMA	= FZ_OOB | FZ_HUGE_OFF | FZ_BAD_KEY | FZ_CLOSE_MR |
			  FZ_RIGHTS,
};

/* What a report leaves out. */
enum fz_ignore {
	FZ_IGN_TX_LEN	= 1 << 0,	/* len of a transmit entry */
	FZ_IGN_REMOTE	= 1 << 1,	/* FI_RMA, FI_REMOTE_WRITE and len of
					 * a remote write's entry */
	FZ_IGN_FLAGS	= 1 << 2,	/* FI_MSG beside FI_TAGGED, and
					 * FI_REMOTE_CQ_DATA of a transmit */
};

/* The features a sequence on this provider may use, and what its report
 * leaves out (fuzz_known.c). */
unsigned fz_features(const char *prov, bool device);
unsigned fz_ignored(const char *prov, bool device);
/* Print the known differences and why, one a line. */
void fz_print_known(void);

/* Run sequences seed .. seed + count - 1, printing each one's report
 * ("seq S" ... "end S"); on device memory, checking the invariants. */
int fz_run(uint64_t seed, unsigned count, bool device);

#endif
