/* emq.h: what the EMQ module's translation units share (all hidden: the .so exports only
 * its OnLoad/OnUnload entry points).
 *
 *   emq.c      the admissions and the schedule: EMQ.ENQUEUE, EMQ.SCHEDULE, EMQ.PROMOTE,
 *              EMQ.DELAY, EMQ.RESCHEDULE; load/unload
 *   emq_hot.c  the worker's hot path: EMQ.CLAIM, EMQ.ACK, EMQ.ACKMANY
 *   emq_kept.c what an ack that deletes its row leaves: the kept task/runs, the seen mark
 *   emq_group.c  grouped claims and acks (the ring, weights, group limits and rates) and the
 *              queue cap, for emq_hot.c's commands
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

/* emq_hot.c: what emq_group.c shares with the claim and the acks */
extern const char CLAIM_LIMIT[], CLAIM_RING[], CLAIM_ROW[], ACK_LANE[];
/* strings to free at the end of a command, in blocks of one small allocation each (a
 * grouped claim bags hundreds: one array doubled past 1 KiB made the allocator consolidate
 * its free lists on every command) */
#define BAG_BLOCK 62
typedef struct BagBlock {
    struct BagBlock *next;
    size_t n;
    EmqStr *v[BAG_BLOCK];
} BagBlock;
typedef struct {
    BagBlock *head;
} Bag;
EmqStr *bag(Bag *b, EmqStr *s);
void bag_free(EmqCtx *ctx, Bag *b);
EmqStr *derived(EmqCtx *ctx, Bag *b, EmqStr *basestr, const char *mid, const EmqStr *tail);
int exists(EmqCtx *ctx, EmqStr *key);
void call(EmqReply *r);
void bump(EmqCtx *ctx, EmqStr *key, const char *field, long long before, long long n);
typedef struct { /* the jobs a claim leases, in start order, read before any write */
    EmqStr **ids, **rows, **pays, **dls, *deadlines;
    long long *tokens;
    size_t n, ndl;
} Lease;
const char *lease_read(EmqCtx *ctx, Bag *b, EmqStr *basestr, Lease *l, long long now);
void lease_write(EmqCtx *ctx, Bag *b, EmqStr *active, Lease *l, long long until);
void lease_reply(EmqCtx *ctx, Lease *l, const char *refusal);
void zset_pop(EmqCtx *ctx, EmqStr *key, EmqStr **ids, size_t n, int emptied);
void claim_record(EmqCtx *ctx, Bag *b, EmqStr *claim_key, Lease *l, long long lease);

/* emq_group.c: the ring of ready groups, group limits and rates, the queue's cap */
long long queue_cap(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *active, long long now,
                    long long want);
void group_claim(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *pending, EmqStr *active,
                 long long now, long long lease, long long want, EmqStr *claim_key);
const char *group_check(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *group,
                        int *queue_done);
void group_left(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *group);

#endif
