/* emq.h: what the EMQ module's translation units share (all hidden: the .so exports only
 * its OnLoad/OnUnload entry points).
 *
 *   emq.c      the admissions and the schedule: EMQ.ENQUEUE, EMQ.SCHEDULE, EMQ.PROMOTE,
 *              EMQ.DELAY, EMQ.RESCHEDULE; load/unload
 *   emq_hot.c  the worker's hot path: EMQ.CLAIM, EMQ.ACK, EMQ.ACKMANY
 *   emq_kept.c what an ack that deletes its row leaves: the kept task/runs, the seen mark
 */
#ifndef EMQ_H
#define EMQ_H

#include <stddef.h>

#include "emq_api.h"

extern const char KIND_ERROR[];      /* EMQKIND job id must be JOB-namespaced */
extern const char WRONGTYPE_ERROR[]; /* the server's WRONGTYPE text */

/* checks that touch no key */
int str_is(const EmqStr *s, const char *lit);
int str_eq(const EmqStr *a, const EmqStr *b);
int is_job(const EmqStr *id);
/* the exact argc, numkeys as declared, no key named twice; replies the refusal itself */
int check_shape(EmqCtx *ctx, EmqStr **argv, int argc, int want_argc, int nkeys,
                const char *numkeys_error, const char *distinct_error);
void score_text(double score, char *buf, size_t size);

/* key reads */
int type_of(EmqCtx *ctx, EmqStr *name);
int is_type_or_empty(EmqCtx *ctx, EmqStr *name, int want);
int zset_has(EmqCtx *ctx, EmqStr *name, EmqStr *member);

/* keyspace events and the wake token */
void notify(EmqCtx *ctx, int type, const char *event, EmqStr *key);
void notify_zrem(EmqCtx *ctx, EmqStr *key);
void wake(EmqCtx *ctx, EmqStr *key);

/* derived keys and numbers as strings (the caller frees them) */
EmqStr *keyat(EmqCtx *ctx, const char *base, size_t blen, const char *mid, const char *tail,
              size_t tlen);
EmqStr *num_str(EmqCtx *ctx, long long n);

/* emq_kept.c: what an ack that deletes its row leaves (includes/kept.lua, seen.lua) */
#define SEEN_MS 30000LL /* how long a deleted id stays on <base>seen */
/* 1 when id is on seen within SEEN_MS of now, 0 when not, -1 when seen is no sorted set */
int seen_recently(EmqCtx *ctx, EmqStr *seen, EmqStr *id);
/* the ids deleted at SERVER ms now join seen; members older than the window leave it */
void mark_seen(EmqCtx *ctx, EmqStr *seen, EmqStr **ids, size_t n, long long now);
/* row's task and runs on the hash kept, PX keep_ms (the row is read, not deleted) */
void keep_beside(EmqCtx *ctx, EmqStr *kept, EmqStr *row, EmqStr *runs, long long keep_ms,
                 long long now);

/* emq_hot.c: register its commands (from load); free what it made (from unload) */
int emq_hot_register(EmqCtx *ctx);
void emq_hot_unload(void);

#endif
