/* emq_kept.c: what an ack that deletes its row leaves behind, twins of includes/kept.lua
 * and includes/seen.lua (EMQ.ACK and EMQ.ACKMANY write it; EMQ.ENQUEUE and EMQ.SCHEDULE
 * read the seen mark).
 *
 *   <base>kept:<id>  a hash {task, runs, completed_at}, PX the kept result's: a job kept
 *                    only for its result still reads its task name and runs (issue 32)
 *   <base>seen       a sorted set of ids deleted at their ack, scored by the SERVER ms of
 *                    the delete and trimmed to the last SEEN_MS at every ack that adds to
 *                    it: a retried admission of such an id writes nothing and answers 0
 *                    (duplicate), as while its row lived (issue 37)
 *
 * Same bytes as the scripts: the task name is the payload's text between its last
 * '"task":"' and the next quote (a codec envelope: its header line's '"t":"'), escapes
 * left in, '' when none; runs is the ack's token. Replication: the kept hash and the trim
 * through Call("!"), the seen ZADD as itself with absolute scores.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emq.h"

static void drop(EmqReply *r) {
    if (r) Emq_FreeCallReply(r);
}

/* The text between the last `key` of s[0..n) that a quote follows and that quote (Lua's
 * '.*KEY([^"]*)"'); NULL when none. */
static const char *last_value(const char *s, size_t n, const char *key, size_t *out) {
    size_t kl = strlen(key), i;
    if (n < kl) return NULL;
    for (i = n - kl + 1; i-- > 0;) {
        if (memcmp(s + i, key, kl) == 0) {
            const char *v = s + i + kl, *q = memchr(v, '"', n - i - kl);
            if (q) {
                *out = (size_t)(q - v);
                return v;
            }
        }
    }
    return NULL;
}

/* includes/kept.lua's task_of: the task name a payload spells, as a new string. */
static EmqStr *task_of(EmqCtx *ctx, const EmqStr *payload) {
    size_t n = 0, len = 0;
    const char *p = payload ? Emq_StringPtrLen(payload, &n) : NULL, *v = NULL;
    if (p && n >= 5 && memcmp(p, "\0EMQ1", 5) == 0) {
        const char *nl = memchr(p + 5, '\n', n - 5);
        if (nl) v = last_value(p + 5, (size_t)(nl - p - 5), "\"t\":\"", &len);
    } else if (p) {
        v = last_value(p, n, "\"task\":\"", &len);
    }
    return Emq_CreateString(ctx, v ? v : "", v ? len : 0);
}

/* includes/kept.lua's keep_beside: row (a hash, not yet deleted) leaves its task and runs
 * on kept for keep_ms. */
void keep_beside(EmqCtx *ctx, EmqStr *kept, EmqStr *row, EmqStr *runs, long long keep_ms,
                 long long now) {
    EmqStr *payload = NULL, *task;
    EmqKey *k = Emq_OpenKey(ctx, row, EMQ_READ);
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_HASH)
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "payload", &payload, NULL);
    Emq_CloseKey(k);
    task = task_of(ctx, payload);
    drop(Emq_Call(ctx, "HSET", "!scscscl", kept, "task", task, "runs", runs,
                             "completed_at", now));
    drop(Emq_Call(ctx, "PEXPIRE", "!sl", kept, keep_ms));
    Emq_FreeString(ctx, task);
    if (payload) Emq_FreeString(ctx, payload);
}

int seen_recently(EmqCtx *ctx, EmqStr *seen, EmqStr *id) {
    EmqKey *k = Emq_OpenKey(ctx, seen, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY, got = 0;
    double at;
    if (t == EMQ_KEYTYPE_ZSET)
        got = Emq_ZsetScore(k, id, &at) == EMQ_OK && at > (double)(Emq_Milliseconds() - SEEN_MS);
    else if (t != EMQ_KEYTYPE_EMPTY)
        got = -1;
    Emq_CloseKey(k);
    return got;
}

void mark_seen(EmqCtx *ctx, EmqStr *seen, EmqStr **ids, size_t n, long long now) {
    EmqStr **v = Emq_Alloc(sizeof(EmqStr *) * 2 * n), *at = num_str(ctx, now);
    EmqKey *k = Emq_OpenKey(ctx, seen, EMQ_READ | EMQ_WRITE);
    double cut = (double)(now - SEEN_MS);
    int stale = 0;
    size_t i;
    char bound[32];
    for (i = 0; i < n; i++) {
        int flags = 0;
        Emq_ZsetAdd(k, (double)now, ids[i], &flags);
        v[2 * i] = at, v[2 * i + 1] = ids[i];
    }
    /* anything below the window? (the script trims unconditionally: the same effect) */
    if (Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, cut, 0, 1) == EMQ_OK) {
        stale = !Emq_ZsetRangeEndReached(k);
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", seen);
    Emq_Replicate(ctx, "ZADD", "sv", seen, v, 2 * n);
    if (stale) {
        snprintf(bound, sizeof(bound), "(%lld", now - SEEN_MS);
        drop(Emq_Call(ctx, "ZREMRANGEBYSCORE", "!scc", seen, "-inf", bound));
    }
    Emq_FreeString(ctx, at);
    Emq_Free(v);
}
