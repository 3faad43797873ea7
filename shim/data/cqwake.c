/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Waking a thread asleep on a CQ in the provider's sread (cq.c counts the
 * sleepers) when a shim entry is queued (cqueue.c). Its own file, so
 * that queueing an entry calls nothing that reads the CQ.
 */
#include "hml.h"

/* Is someone asleep on the CQ, or may be: its wait object is in the
 * application's hands (FI_GETWAIT, a wait set)? */
static bool watched(const struct hml_cq *c)
{
	return __atomic_load_n(&c->exported, __ATOMIC_RELAXED) ||
	       c->wait_obj == FI_WAIT_SET;
}

bool hml_cq_watched(const struct hml_cq *c)
{
	return c && c->wait_obj != FI_WAIT_NONE &&
	       (__atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST) || watched(c));
}

/* A shim entry was queued: wake whoever may sleep on the CQ, through the
 * provider's wait object; a CQ without one is never signalled. */
void hml_cq_wake(struct hml_cq *c)
{
	if (c->wait_obj == FI_WAIT_NONE)
		return;
	if (__atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST) || watched(c))
		c->prov->signal(c->cq);
}
