/* emq_hot.c: the worker's hot path, native twins of the claim, ack and ack_many scripts.
 *
 *   EMQ.CLAIM   2 <pending> <active> <queue base> <lease ms> <count> [<claim id>]
 *               -> id1, token1, payload1, id2, ... (empty when nothing is claimable)
 *   EMQ.ACK     3 <row> <active> <completed> <id> <token> <keep 1|0> [<result> <keep ms>]
 *               -> 1
 *   EMQ.ACKMANY 2 <active> <completed> <queue base> <1|0|1r|0r> <id> <token> [...]
 *               -> one entry per job: 1, or the refusal text the script gives in its slot
 *
 * The tails, the replies and the refusal texts are the scripts' (claim-2.lua, ack-3.lua,
 * ack_many-2.lua). Each command does what its script does for what a plain queue meets:
 *
 *   claim    no queue rate (<base>rate), rows that are hashes in state pending with a
 *            payload, an integer (or no) attempts and no cancel mark; a deadline (expires) still
 *            ahead is dropped as the script's started() drops it (HDEL expires, ZREM
 *            <base>deadlines); a paused or blocked queue gives nothing; a queue cap
 *            (<base>limit) bounds the count; groups in the ring (<base>ring) take their
 *            turns, after the groups whose wait on <base>gwait is over rejoined it, as the
 *            script's (emq_group.c: group_claim);
 *   ack      rows without a flow link (parent, flow, watched) or a held recurrence
 *            occurrence behind them (follower); a unique key, a debounce key and a kept
 *            result's done token (notify) are released as ended() does; a grouped job's
 *            group is left as left_active() leaves it (emq_group.c: group_left); a
 *            deleted row leaves its task and runs beside a kept result and its id on
 *            <base>seen (emq_kept.c, as includes/kept.lua and seen.lua).
 *
 * Anything else is refused, before any write, with a text that ends in "not native":
 *   EMQSTATE claim rate not native     a queue rate is set
 *   EMQSTATE claim limit not native    the queue cap is not an integer string
 *   EMQSTATE claim ring not native     a group's key or field is not what the scripts write
 *   EMQSTATE claim id not native       the claim id has leased before (<base>claim:<id>
 *                                      exists): the script answers those jobs again
 *   EMQSTATE claim row not native      a candidate row is not plain (see above), its deadline
 *                                      has passed (the script ends it expired), or a key the
 *                                      claim writes holds another type
 *   EMQSTATE ack lane not native       a grouped job whose group's keys or fields are not
 *                                      what the scripts write
 *   EMQSTATE ack flow not native       a flow child, parent or linked owner, or a job a
 *                                      recurrence occurrence waits behind (follower)
 *   EMQSTATE ack row not native        a row or key the ack touches is not what a plain
 *                                      job's is (the script's own error comes from it)
 * and the caller sends the script instead (the runtime does, as for EMQ.PROMOTE's grouped
 * rows), which gives the script's reply or error. Native-only refusals of bad input: a
 * lease or count that is not a positive integer, an ACKMANY flag other than 1, 0, 1r, 0r,
 * a keep ms that is not a positive integer, and the shape (numkeys, distinct keys, argc).
 *
 * Check before write: every candidate row, every key and counter is read before the first
 * write, so a refusal writes nothing. Replication: the effects, as the other commands
 * (ZREM / ZADD with absolute scores, one fixed script for the rows' fields, HINCRBY, DEL,
 * and through Call("!") the rarer writes: a kept result's SET, the unique key's release,
 * the done token). Clock: SERVER ms (Milliseconds(), as TIME in the scripts).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emq.h"

#define EMQ_HASH_DELETE ((EmqStr *)(long)1)

static const char CLAIM_RATE[] = "EMQSTATE claim rate not native";
const char CLAIM_LIMIT[] = "EMQSTATE claim limit not native";
const char CLAIM_RING[] = "EMQSTATE claim ring not native";
const char CLAIM_ROW[] = "EMQSTATE claim row not native";
static const char CLAIM_ID[] = "EMQSTATE claim id not native";
const char ACK_LANE[] = "EMQSTATE ack lane not native";
static const char ACK_FLOW[] = "EMQSTATE ack flow not native";
static const char ACK_ROW[] = "EMQSTATE ack row not native";
static const char GONE[] = "EMQSTALE job gone";
static const char MISMATCH[] = "EMQSTALE ack token mismatch";
static const char NOT_ACTIVE[] = "EMQSTATE ack not active";

/* What replicas and the AOF run for a claim's rows (deterministic: no clock in it). */
static const char SET_ACTIVE_LUA[] =
    "for i, k in ipairs(KEYS) do redis.call('HSET', k, 'attempts', ARGV[i], 'state', "
    "'active') end";
/* ... and for the rows an ack keeps (ARGV[1] = the completion ms). */
static const char SET_COMPLETED_LUA[] =
    "for _, k in ipairs(KEYS) do redis.call('HSET', k, 'state', 'completed', 'completed_at', "
    "ARGV[1]) redis.call('HDEL', k, 'cancel') end";

/* Values written into rows, made once at load. */
static EmqStr *s_active, *s_completed;

/* -- strings to free at the end of a command ------------------------------------------- */

EmqStr *bag(Bag *b, EmqStr *s) {
    if (s == NULL) return NULL;
    if (b->head == NULL || b->head->n == BAG_BLOCK) {
        BagBlock *blk = Emq_Alloc(sizeof(BagBlock));
        blk->next = b->head, blk->n = 0;
        b->head = blk;
    }
    b->head->v[b->head->n++] = s;
    return s;
}

void bag_free(EmqCtx *ctx, Bag *b) {
    while (b->head) {
        BagBlock *blk = b->head;
        size_t i;
        for (i = 0; i < blk->n; i++) Emq_FreeString(ctx, blk->v[i]);
        b->head = blk->next;
        Emq_Free(blk);
    }
}

EmqStr *derived(EmqCtx *ctx, Bag *b, EmqStr *basestr, const char *mid, const EmqStr *tail) {
    size_t blen, tlen = 0;
    const char *base = Emq_StringPtrLen(basestr, &blen), *t = "";
    if (tail) t = Emq_StringPtrLen(tail, &tlen);
    return bag(b, keyat(ctx, base, blen, mid, t, tlen));
}

static int positive(const EmqStr *s, long long *out) {
    return Emq_StringToLongLong(s, out) == EMQ_OK && *out >= 1;
}

static int is_empty_str(const EmqStr *s) {
    size_t n;
    Emq_StringPtrLen(s, &n);
    return n == 0;
}

int exists(EmqCtx *ctx, EmqStr *key) { return type_of(ctx, key) != EMQ_KEYTYPE_EMPTY; }

/* A hash counter's value (0 when absent) if it can take +n; else 0 returned. */
static int counter(EmqCtx *ctx, EmqStr *key, const char *field, long long n, long long *out) {
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY, ok = 1;
    EmqStr *v = NULL;
    *out = 0;
    if (t == EMQ_KEYTYPE_HASH) Emq_HashGet(k, EMQ_HASH_CFIELDS, field, &v, NULL);
    else if (t != EMQ_KEYTYPE_EMPTY) ok = 0;
    Emq_CloseKey(k);
    if (v) {
        if (Emq_StringToLongLong(v, out) != EMQ_OK || *out > 0x7fffffffffffffffLL - n) ok = 0;
        Emq_FreeString(ctx, v);
    }
    return ok;
}

/* counter + n through the key API, replicated and notified as HINCRBY. */
void bump(EmqCtx *ctx, EmqStr *key, const char *field, long long before, long long n) {
    EmqStr *v = num_str(ctx, before + n), *by = num_str(ctx, n);
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, field, v, NULL);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_HASH, "hincrby", key);
    Emq_Replicate(ctx, "HINCRBY", "scs", key, field, by);
    Emq_FreeString(ctx, v);
    Emq_FreeString(ctx, by);
}

void call(EmqReply *r) {
    if (r) Emq_FreeCallReply(r);
}

/* -- EMQ.CLAIM 2 <pending> <active> <queue base> <lease ms> <count> ------------------- */

/* Every candidate row read, before any write: NULL when each is a plain pending row (its
 * payload, token and any deadline still ahead kept on l), else the refusal. */
const char *lease_read(EmqCtx *ctx, Bag *b, EmqStr *basestr, Lease *l, long long now) {
    size_t i, n = l->n;
    const char *refusal = NULL;
    EmqKey *k;
    l->rows = Emq_Alloc(sizeof(EmqStr *) * n);
    l->pays = Emq_Alloc(sizeof(EmqStr *) * n);
    l->tokens = Emq_Alloc(sizeof(long long) * n);
    l->dls = Emq_Alloc(sizeof(EmqStr *) * n);
    for (i = 0; i < n && !refusal; i++) {
        EmqStr *att = NULL, *state = NULL, *cancel = NULL, *expires = NULL;
        l->pays[i] = NULL;
        l->rows[i] = derived(ctx, b, basestr, "job:", l->ids[i]);
        k = Emq_OpenKey(ctx, l->rows[i], EMQ_READ);
        if (k == NULL || Emq_KeyType(k) != EMQ_KEYTYPE_HASH) {
            refusal = CLAIM_ROW;
        } else {
            Emq_HashGet(k, EMQ_HASH_CFIELDS, "payload", &l->pays[i], "attempts", &att, "state",
                        &state, "cancel", &cancel, "expires", &expires, NULL);
            bag(b, l->pays[i]), bag(b, att), bag(b, state), bag(b, cancel), bag(b, expires);
            l->tokens[i] = 0;
            if (!l->pays[i] || cancel || !state || !str_is(state, "pending") ||
                (att && Emq_StringToLongLong(att, &l->tokens[i]) != EMQ_OK) ||
                l->tokens[i] == 0x7fffffffffffffffLL)
                refusal = CLAIM_ROW;
            if (expires && !refusal) {
                /* a deadline still ahead is dropped by the claim; one at or past now is
                 * the script's to end (expired) */
                long long at;
                if (Emq_StringToLongLong(expires, &at) != EMQ_OK || at <= now) refusal = CLAIM_ROW;
                else l->dls[l->ndl++] = l->ids[i];
            }
            l->tokens[i]++;
        }
        Emq_CloseKey(k);
    }
    if (!refusal && l->ndl) {
        l->deadlines = derived(ctx, b, basestr, "deadlines", NULL);
        if (!is_type_or_empty(ctx, l->deadlines, EMQ_KEYTYPE_ZSET)) refusal = CLAIM_ROW;
    }
    return refusal;
}

/* The rows read by lease_read written: each active at its next attempt (its deadline
 * dropped), and on active until now + lease. */
void lease_write(EmqCtx *ctx, Bag *b, EmqStr *active, Lease *l, long long until) {
    size_t i, n = l->n;
    EmqStr **atts = Emq_Alloc(sizeof(EmqStr *) * n), **pairs, *score;
    EmqKey *k;
    for (i = 0; i < n; i++) {
        atts[i] = bag(b, num_str(ctx, l->tokens[i]));
        k = Emq_OpenKey(ctx, l->rows[i], EMQ_READ | EMQ_WRITE);
        Emq_HashSet(k, EMQ_HASH_CFIELDS, "attempts", atts[i], "state", s_active, NULL);
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_HASH, "hset", l->rows[i]);
    }
    Emq_Replicate(ctx, "EVAL", "clvv", SET_ACTIVE_LUA, (long long)n, l->rows, n, atts, n);
    Emq_Free(atts);
    if (l->ndl) { /* the claimed jobs met their deadlines: they keep none from now on */
        size_t j;
        for (i = 0, j = 0; i < n && j < l->ndl; i++) {
            if (l->ids[i] != l->dls[j]) continue;
            j++;
            k = Emq_OpenKey(ctx, l->rows[i], EMQ_READ | EMQ_WRITE);
            Emq_HashSet(k, EMQ_HASH_CFIELDS, "expires", EMQ_HASH_DELETE, NULL);
            Emq_CloseKey(k);
            notify(ctx, EMQ_NOTIFY_HASH, "hdel", l->rows[i]);
            Emq_Replicate(ctx, "HDEL", "sc", l->rows[i], "expires");
        }
        k = Emq_OpenKey(ctx, l->deadlines, EMQ_READ | EMQ_WRITE);
        if (Emq_KeyType(k) == EMQ_KEYTYPE_ZSET)
            for (i = 0; i < l->ndl; i++) {
                int deleted;
                Emq_ZsetRem(k, l->dls[i], &deleted);
            }
        Emq_CloseKey(k);
        notify_zrem(ctx, l->deadlines);
        Emq_Replicate(ctx, "ZREM", "sv", l->deadlines, l->dls, l->ndl);
    }

    score = bag(b, num_str(ctx, until));
    pairs = Emq_Alloc(sizeof(EmqStr *) * 2 * n);
    k = Emq_OpenKey(ctx, active, EMQ_READ | EMQ_WRITE);
    for (i = 0; i < n; i++) {
        int flags = 0;
        Emq_ZsetAdd(k, (double)until, l->ids[i], &flags);
        pairs[2 * i] = score, pairs[2 * i + 1] = l->ids[i];
    }
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", active);
    Emq_Replicate(ctx, "ZADD", "sv", active, pairs, 2 * n);
    Emq_Free(pairs);
}

/* The claim's reply: id, token, payload per job; or the refusal. Frees l's arrays. */
void lease_reply(EmqCtx *ctx, Lease *l, const char *refusal) {
    size_t i;
    if (refusal) {
        Emq_ReplyWithError(ctx, refusal);
    } else {
        Emq_ReplyWithArray(ctx, (long)(3 * l->n));
        for (i = 0; i < l->n; i++) {
            Emq_ReplyWithString(ctx, l->ids[i]);
            Emq_ReplyWithLongLong(ctx, l->tokens[i]);
            Emq_ReplyWithString(ctx, l->pays[i]);
        }
    }
    if (l->ids) Emq_Free(l->ids);
    if (l->rows) Emq_Free(l->rows);
    if (l->pays) Emq_Free(l->pays);
    if (l->tokens) Emq_Free(l->tokens);
    if (l->dls) Emq_Free(l->dls);
    memset(l, 0, sizeof(*l));
}

/* A first use of a claim id: what it leased, as the script's HSET <claim key> id token ...,
 * PEXPIRE lease, so a retried claim answers the same jobs. */
void claim_record(EmqCtx *ctx, Bag *b, EmqStr *claim_key, Lease *l, long long lease) {
    size_t i, n = l->n;
    EmqStr **pairs;
    EmqKey *k;
    if (n == 0) return;
    pairs = Emq_Alloc(sizeof(EmqStr *) * 2 * n);
    k = Emq_OpenKey(ctx, claim_key, EMQ_READ | EMQ_WRITE);
    for (i = 0; i < n; i++) {
        pairs[2 * i] = l->ids[i], pairs[2 * i + 1] = bag(b, num_str(ctx, l->tokens[i]));
        Emq_HashSet(k, EMQ_HASH_NONE, pairs[2 * i], pairs[2 * i + 1], NULL);
    }
    Emq_SetExpire(k, lease);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_HASH, "hset", claim_key);
    notify(ctx, EMQ_NOTIFY_GENERIC, "expire", claim_key);
    Emq_Replicate(ctx, "HSET", "sv", claim_key, pairs, 2 * n);
    Emq_Replicate(ctx, "PEXPIRE", "sl", claim_key, lease);
    Emq_Free(pairs);
}

static int cmd_claim(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *pending, *active, *basestr, *wake_key, *claim_key = NULL;
    EmqKey *k;
    Bag b = {0};
    Lease l;
    long long lease, want, now;
    size_t cap, left;
    const char *refusal = NULL;
    int t, due = 0;

    if (!check_shape(ctx, argv, argc, argc == 8 ? 8 : 7, 2, "ERR EMQ.CLAIM numkeys must be 2",
                     "ERR EMQ.CLAIM keys must be distinct"))
        return EMQ_OK;
    pending = argv[2], active = argv[3], basestr = argv[4];
    if (!positive(argv[5], &lease))
        return Emq_ReplyWithError(ctx, "ERR EMQ.CLAIM lease must be a positive integer");
    if (!positive(argv[6], &want))
        return Emq_ReplyWithError(ctx, "ERR EMQ.CLAIM count must be a positive integer");
    if (!is_type_or_empty(ctx, pending, EMQ_KEYTYPE_ZSET) ||
        !is_type_or_empty(ctx, active, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    now = Emq_Milliseconds();
    memset(&l, 0, sizeof(l));

    /* the queue's controls, in the script's order: a claim id used before, its rate, the
     * groups reopening now, then a pause or block (nothing claimed; only a reopen
     * written), then its cap. A claim id (the script's ARGV[4]): a first use claims here
     * and records what it leased on <base>claim:<id>; one used before is the script's
     * replay */
    if (argc == 8 && !is_empty_str(argv[7])) {
        claim_key = derived(ctx, &b, basestr, "claim:", argv[7]);
        if (exists(ctx, claim_key)) refusal = CLAIM_ID;
    }
    if (!refusal && exists(ctx, derived(ctx, &b, basestr, "rate", NULL))) refusal = CLAIM_RATE;
    if (!refusal) { /* groups whose wait ends now: group_claim reopens them first */
        k = Emq_OpenKey(ctx, derived(ctx, &b, basestr, "gwait", NULL), EMQ_READ);
        t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
        if (t == EMQ_KEYTYPE_ZSET &&
            Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, (double)now, 0, 0) == EMQ_OK) {
            due = !Emq_ZsetRangeEndReached(k);
            Emq_ZsetRangeStop(k);
        } else if (t != EMQ_KEYTYPE_EMPTY && t != EMQ_KEYTYPE_ZSET) {
            refusal = CLAIM_RING;
        }
        Emq_CloseKey(k);
    }
    if (!refusal && (exists(ctx, derived(ctx, &b, basestr, "paused", NULL)) ||
                     exists(ctx, derived(ctx, &b, basestr, "blocked_until", NULL))))
        want = 0;
    if (!refusal && want) want = queue_cap(ctx, &b, basestr, active, now, want);
    if (!refusal && want < 0) refusal = CLAIM_LIMIT;
    wake_key = derived(ctx, &b, basestr, "wake", NULL);
    if (!refusal && (want || due) && !is_type_or_empty(ctx, wake_key, EMQ_KEYTYPE_LIST))
        refusal = CLAIM_ROW;
    if (refusal || (want == 0 && !due)) {
        bag_free(ctx, &b);
        return refusal ? Emq_ReplyWithError(ctx, refusal) : Emq_ReplyWithArray(ctx, 0);
    }
    if (due || exists(ctx, derived(ctx, &b, basestr, "ring", NULL))) {
        group_claim(ctx, &b, basestr, pending, active, now, lease, want, claim_key);
        bag_free(ctx, &b);
        return EMQ_OK;
    }

    /* the candidates: pending's first <count> (ZPOPMIN's order), every row read */
    k = Emq_OpenKey(ctx, pending, EMQ_READ);
    cap = k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET ? Emq_ValueLength(k) : 0;
    if ((unsigned long long)want < cap) cap = (size_t)want;
    if (cap == 0) {
        Emq_CloseKey(k);
        bag_free(ctx, &b);
        return Emq_ReplyWithArray(ctx, 0);
    }
    l.ids = Emq_Alloc(sizeof(EmqStr *) * cap);
    if (Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, HUGE_VAL, 0, 0) == EMQ_OK) {
        while (l.n < cap && !Emq_ZsetRangeEndReached(k)) {
            l.ids[l.n++] = bag(&b, Emq_ZsetRangeCurrentElement(k, NULL));
            if (!Emq_ZsetRangeNext(k)) break;
        }
        Emq_ZsetRangeStop(k);
    }
    left = Emq_ValueLength(k) - l.n;
    Emq_CloseKey(k);
    refusal = lease_read(ctx, &b, basestr, &l, now);
    if (!refusal) {
        /* the writes: off pending (as ZPOPMIN), the rows leased, and a wake token when
         * work is left behind */
        zset_pop(ctx, pending, l.ids, l.n, left == 0);
        lease_write(ctx, &b, active, &l, now + lease);
        if (claim_key) claim_record(ctx, &b, claim_key, &l, lease);
        if ((long long)l.n == want && left > 0) wake(ctx, wake_key);
    }
    lease_reply(ctx, &l, refusal);
    bag_free(ctx, &b);
    return EMQ_OK;
}

/* ids off a sorted set, replicated and notified as the script's ZPOPMIN (emptied: del). */
void zset_pop(EmqCtx *ctx, EmqStr *key, EmqStr **ids, size_t n, int emptied) {
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ | EMQ_WRITE);
    size_t i;
    for (i = 0; i < n; i++) {
        int deleted;
        Emq_ZsetRem(k, ids[i], &deleted);
    }
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zpopmin", key);
    if (emptied) notify(ctx, EMQ_NOTIFY_GENERIC, "del", key);
    Emq_Replicate(ctx, "ZREM", "sv", key, ids, n);
}

/* -- acks: what one job's completion reads and writes -------------------------------- */

/* One job to complete, read before any write. */
typedef struct {
    EmqStr *id, *row, *token; /* the token: the runs a deleted row leaves (emq_kept.c) */
    EmqStr *unique, *until, *notify, *cancel, *debounce;
    EmqStr *group;      /* its group, whose active count and ring place follow */
    EmqStr *result;     /* a result to keep, NULL for none */
    long long keep_ms;  /* its PX */
    long long notify_ms;
} Done;

/* The fence and the reads for one job: NULL (held and plain: *d filled), a refusal text
 * the script gives (GONE, MISMATCH), or a not-native text. `active` NULL: no active check
 * here (ACKMANY checks the members together, as the script's ZMSCORE). */
static const char *read_done(EmqCtx *ctx, Bag *b, Done *d, EmqStr *token) {
    EmqStr *att = NULL, *parent = NULL, *flow = NULL, *watched = NULL,
           *follower = NULL;
    EmqKey *k = Emq_OpenKey(ctx, d->row, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    const char *why = NULL;
    d->token = token;
    if (t != EMQ_KEYTYPE_HASH) {
        Emq_CloseKey(k);
        return t == EMQ_KEYTYPE_EMPTY ? GONE : ACK_ROW;
    }
    Emq_HashGet(k, EMQ_HASH_CFIELDS, "attempts", &att, "group", &d->group, "unique", &d->unique,
                "unique_until", &d->until, "notify", &d->notify, "parent", &parent, NULL);
    Emq_HashGet(k, EMQ_HASH_CFIELDS, "flow", &flow, "watched", &watched, "cancel", &d->cancel,
                "debounce", &d->debounce, "follower", &follower, NULL);
    Emq_CloseKey(k);
    bag(b, att), bag(b, d->group), bag(b, d->unique), bag(b, d->until), bag(b, d->notify);
    bag(b, parent), bag(b, flow), bag(b, watched), bag(b, d->cancel), bag(b, d->debounce);
    bag(b, follower);
    if (!att) return GONE;
    if (!str_eq(att, token)) return MISMATCH;
    if (parent || flow || watched || follower) why = ACK_FLOW;
    else if (d->notify && (Emq_StringToLongLong(d->notify, &d->notify_ms) != EMQ_OK))
        why = ACK_ROW;
    return why;
}

/* The unique key's owner check, before any write: 1 when uk holds this id, 0 when it
 * holds another or nothing; -1 when it is not a string (the script's GET would fail). */
static int owns_unique(EmqCtx *ctx, EmqStr *uk, EmqStr *id) {
    EmqReply *r;
    int t = type_of(ctx, uk), own = 0;
    size_t len, ilen;
    const char *p, *ip;
    if (t == EMQ_KEYTYPE_EMPTY) return 0;
    if (t != EMQ_KEYTYPE_STRING) return -1;
    r = Emq_Call(ctx, "GET", "s", uk);
    if (r && Emq_CallReplyType(r) == EMQ_REPLY_STRING) {
        p = Emq_CallReplyStringPtr(r, &len);
        ip = Emq_StringPtrLen(id, &ilen);
        own = len == ilen && memcmp(p, ip, len) == 0;
    }
    call(r);
    return own;
}

/* ended(p, row, id, 'completed') less the counter (bumped once by the caller): the unique
 * key released (PEXPIREAT at unique_until when that is ahead, else DEL), the done token
 * left for waiters (DEL, RPUSH 'completed', PEXPIRE notify ms). Through Call("!"), so
 * they replicate as themselves. */
static void release(EmqCtx *ctx, Bag *b, EmqStr *basestr, Done *d, long long now) {
    if (d->unique) {
        EmqStr *uk = derived(ctx, b, basestr, "unique:", d->unique);
        long long until = 0;
        if (owns_unique(ctx, uk, d->id) == 1) {
            if (d->until && Emq_StringToLongLong(d->until, &until) == EMQ_OK && until > now)
                call(Emq_Call(ctx, "PEXPIREAT", "!sl", uk, until));
            else
                call(Emq_Call(ctx, "DEL", "!s", uk));
        }
    }
    if (d->debounce) { /* released unless a later window owns it already */
        EmqStr *dk = derived(ctx, b, basestr, "debounce:", d->debounce);
        EmqStr *owner = NULL;
        EmqKey *k = Emq_OpenKey(ctx, dk, EMQ_READ);
        if (k && Emq_KeyType(k) == EMQ_KEYTYPE_HASH)
            Emq_HashGet(k, EMQ_HASH_CFIELDS, "id", &owner, NULL);
        Emq_CloseKey(k);
        if (owner) {
            if (str_eq(owner, d->id)) call(Emq_Call(ctx, "DEL", "!s", dk));
            Emq_FreeString(ctx, owner);
        }
    }
    if (d->notify) {
        EmqStr *dk = derived(ctx, b, basestr, "done:", d->id);
        call(Emq_Call(ctx, "DEL", "!s", dk));
        call(Emq_Call(ctx, "RPUSH", "!sc", dk, "completed"));
        call(Emq_Call(ctx, "PEXPIRE", "!sl", dk, d->notify_ms));
    }
}

/* Checks on what the completion writes besides the row, before any write: the unique key
 * is a string or absent, the counter can take +n, the completed set is a sorted set; rows
 * deleted (not keep): the seen set is a sorted set, a kept result's kept hash a hash. */
static const char *check_targets(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *stats,
                                 EmqStr *completed, Done *ds, size_t n, long long *count,
                                 int keep) {
    size_t i;
    int grouped = 0; /* the queue's group keys checked */
    if (!counter(ctx, stats, "completed", (long long)n, count)) return ACK_ROW;
    if (!is_type_or_empty(ctx, completed, EMQ_KEYTYPE_ZSET)) return ACK_ROW;
    if (!keep && !is_type_or_empty(ctx, derived(ctx, b, basestr, "seen", NULL), EMQ_KEYTYPE_ZSET))
        return ACK_ROW;
    for (i = 0; i < n; i++) {
        if (!keep && ds[i].result &&
            !is_type_or_empty(ctx, derived(ctx, b, basestr, "kept:", ds[i].id), EMQ_KEYTYPE_HASH))
            return ACK_ROW;
        if (ds[i].group && group_check(ctx, b, basestr, ds[i].group, &grouped)) return ACK_LANE;
        if (ds[i].unique &&
            owns_unique(ctx, derived(ctx, b, basestr, "unique:", ds[i].unique), ds[i].id) < 0)
            return ACK_ROW;
        if (ds[i].notify && !is_type_or_empty(ctx, derived(ctx, b, basestr, "done:", ds[i].id),
                                              EMQ_KEYTYPE_LIST))
            return ACK_ROW;
        if (ds[i].debounce &&
            !is_type_or_empty(ctx, derived(ctx, b, basestr, "debounce:", ds[i].debounce),
                              EMQ_KEYTYPE_HASH))
            return ACK_ROW;
    }
    return NULL;
}

/* The completion of n held jobs, all checked: off active, their results kept, counted,
 * released, and their rows kept as completed (indexed on the completed set at now) or
 * deleted. */
static void complete(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *active, EmqStr *completed,
                     EmqStr *stats, Done *ds, size_t n, long long count, int keep) {
    EmqKey *k;
    EmqStr **v = Emq_Alloc(sizeof(EmqStr *) * 2 * n), *at;
    long long now = Emq_Milliseconds();
    size_t i, left;
    int deleted;

    k = Emq_OpenKey(ctx, active, EMQ_READ | EMQ_WRITE);
    for (i = 0; i < n; i++) {
        Emq_ZsetRem(k, ds[i].id, &deleted);
        v[i] = ds[i].id;
    }
    left = Emq_KeyType(k) == EMQ_KEYTYPE_ZSET ? Emq_ValueLength(k) : 0;
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zrem", active);
    if (!left) notify(ctx, EMQ_NOTIFY_GENERIC, "del", active);
    Emq_Replicate(ctx, "ZREM", "sv", active, v, n);

    for (i = 0; i < n; i++)
        if (ds[i].result)
            call(Emq_Call(ctx, "SET", "!sscl", derived(ctx, b, basestr, "result:", ds[i].id),
                          ds[i].result, "PX", ds[i].keep_ms));
    for (i = 0; i < n; i++)
        if (ds[i].group) group_left(ctx, b, basestr, ds[i].group);
    bump(ctx, stats, "completed", count, (long long)n);
    for (i = 0; i < n; i++) release(ctx, b, basestr, &ds[i], now);

    if (keep) {
        at = bag(b, num_str(ctx, now));
        for (i = 0; i < n; i++) {
            k = Emq_OpenKey(ctx, ds[i].row, EMQ_READ | EMQ_WRITE);
            Emq_HashSet(k, EMQ_HASH_CFIELDS, "state", s_completed, "completed_at", at, NULL);
            if (ds[i].cancel) Emq_HashSet(k, EMQ_HASH_CFIELDS, "cancel", EMQ_HASH_DELETE, NULL);
            Emq_CloseKey(k);
            notify(ctx, EMQ_NOTIFY_HASH, "hset", ds[i].row);
            if (ds[i].cancel) notify(ctx, EMQ_NOTIFY_HASH, "hdel", ds[i].row);
            v[i] = ds[i].row;
        }
        Emq_Replicate(ctx, "EVAL", "clvs", SET_COMPLETED_LUA, (long long)n, v, n, at);
        k = Emq_OpenKey(ctx, completed, EMQ_READ | EMQ_WRITE);
        for (i = 0; i < n; i++) {
            int flags = 0;
            Emq_ZsetAdd(k, (double)now, ds[i].id, &flags);
            v[2 * i] = at, v[2 * i + 1] = ds[i].id;
        }
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_ZSET, "zadd", completed);
        Emq_Replicate(ctx, "ZADD", "sv", completed, v, 2 * n);
    } else {
        for (i = 0; i < n; i++)
            if (ds[i].result)
                keep_beside(ctx, derived(ctx, b, basestr, "kept:", ds[i].id), ds[i].row,
                            ds[i].token, ds[i].keep_ms, now);
        for (i = 0; i < n; i++) {
            k = Emq_OpenKey(ctx, ds[i].row, EMQ_READ | EMQ_WRITE);
            Emq_DeleteKey(k);
            Emq_CloseKey(k);
            notify(ctx, EMQ_NOTIFY_GENERIC, "del", ds[i].row);
            v[i] = ds[i].row;
        }
        Emq_Replicate(ctx, "DEL", "v", v, n);
        for (i = 0; i < n; i++) v[i] = ds[i].id;
        mark_seen(ctx, derived(ctx, b, basestr, "seen", NULL), v, n, now);
    }
    Emq_Free(v);
}

/* The queue base from a key that ends in `word` (the scripts' string.sub). */
static EmqStr *base_of(EmqCtx *ctx, Bag *b, EmqStr *key, size_t cut) {
    size_t len;
    const char *p = Emq_StringPtrLen(key, &len);
    return bag(b, Emq_CreateString(ctx, p, len > cut ? len - cut : 0));
}

/* -- EMQ.ACK 3 <row> <active> <completed> <id> <token> <keep> [<result> <keep ms>] ---- */

static int cmd_ack(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *active, *completed, *basestr, *stats;
    Done d;
    Bag b = {0};
    const char *refusal;
    long long count;

    if (argc == 8 || argc == 10) {
        if (!check_shape(ctx, argv, argc, argc, 3, "ERR EMQ.ACK numkeys must be 3",
                         "ERR EMQ.ACK keys must be distinct"))
            return EMQ_OK;
    } else {
        return Emq_WrongArity(ctx);
    }
    memset(&d, 0, sizeof(d));
    d.row = argv[2], active = argv[3], completed = argv[4], d.id = argv[5];
    if (argc == 10 && !is_empty_str(argv[9])) {
        if (!positive(argv[9], &d.keep_ms))
            return Emq_ReplyWithError(ctx, "ERR EMQ.ACK keep ms must be a positive integer");
        d.result = argv[8];
    }
    if (!is_job(d.id)) return Emq_ReplyWithError(ctx, KIND_ERROR);
    if (!is_type_or_empty(ctx, active, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    refusal = read_done(ctx, &b, &d, argv[6]);
    if (!refusal && !zset_has(ctx, active, d.id)) refusal = NOT_ACTIVE;
    basestr = base_of(ctx, &b, active, 6);
    stats = derived(ctx, &b, basestr, "stats", NULL);
    if (!refusal) refusal = check_targets(ctx, &b, basestr, stats, completed, &d, 1, &count,
                                            str_is(argv[7], "1"));
    if (refusal) {
        bag_free(ctx, &b);
        return Emq_ReplyWithError(ctx, refusal);
    }
    complete(ctx, &b, basestr, active, completed, stats, &d, 1, count, str_is(argv[7], "1"));
    bag_free(ctx, &b);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- EMQ.ACKMANY 2 <active> <completed> <queue base> <flag> <id> <token> ... ----------- */

static int cmd_ackmany(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *active, *completed, *basestr, *stats;
    Done *ds = NULL;
    const char **out = NULL; /* per entry: NULL = 1 (completed), else the refusal text */
    size_t *slot = NULL, *first = NULL;
    size_t entries, i, j, live = 0;
    int stride, keep;
    Bag b = {0};
    const char *refusal = NULL, *again;
    long long count = 0;
    EmqKey *k;

    if (argc < 6) return Emq_WrongArity(ctx);
    if (!check_shape(ctx, argv, argc, argc, 2, "ERR EMQ.ACKMANY numkeys must be 2",
                     "ERR EMQ.ACKMANY keys must be distinct"))
        return EMQ_OK;
    active = argv[2], completed = argv[3], basestr = argv[4];
    if (str_is(argv[5], "1") || str_is(argv[5], "0")) stride = 2;
    else if (str_is(argv[5], "1r") || str_is(argv[5], "0r")) stride = 4;
    else return Emq_ReplyWithError(ctx, "ERR EMQ.ACKMANY flag must be 1, 0, 1r or 0r");
    keep = Emq_StringPtrLen(argv[5], &i)[0] == '1';
    if ((argc - 6) % stride)
        return Emq_ReplyWithError(ctx, "ERR EMQ.ACKMANY entries must come in whole");
    if (!is_type_or_empty(ctx, active, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    entries = (size_t)(argc - 6) / (size_t)stride;
    if (entries == 0) return Emq_ReplyWithArray(ctx, 0);
    ds = Emq_Alloc(sizeof(Done) * entries);
    out = Emq_Alloc(sizeof(char *) * entries);
    slot = Emq_Alloc(sizeof(size_t) * entries);
    first = Emq_Alloc(sizeof(size_t) * entries);
    k = Emq_OpenKey(ctx, active, EMQ_READ);
    for (i = 0; i < entries && !refusal; i++) {
        EmqStr **e = argv + 6 + i * (size_t)stride;
        Done d;
        memset(&d, 0, sizeof(d));
        first[i] = i;
        d.id = e[0];
        if (!is_job(d.id)) {
            out[i] = KIND_ERROR;
            continue;
        }
        for (j = 0; j < i; j++)
            if (first[j] == j && out[j] != KIND_ERROR && str_eq(argv[6 + j * stride], d.id))
                break;
        if (j < i) { /* an id repeated in one call: decided at the end */
            first[i] = j;
            out[i] = NULL;
            continue;
        }
        d.row = derived(ctx, &b, basestr, "job:", d.id);
        out[i] = read_done(ctx, &b, &d, e[1]);
        if (out[i] == ACK_LANE || out[i] == ACK_FLOW || out[i] == ACK_ROW) {
            refusal = out[i];
            break;
        }
        if (out[i] == NULL) {
            double score;
            if (!k || Emq_KeyType(k) != EMQ_KEYTYPE_ZSET || Emq_ZsetScore(k, d.id, &score) != EMQ_OK) {
                out[i] = NOT_ACTIVE;
                continue;
            }
            if (stride == 4 && !is_empty_str(e[3])) {
                if (!positive(e[3], &d.keep_ms)) {
                    refusal = "ERR EMQ.ACKMANY keep ms must be a positive integer";
                    break;
                }
                d.result = e[2];
            }
            slot[live] = i;
            ds[live++] = d;
        }
    }
    Emq_CloseKey(k);
    stats = derived(ctx, &b, basestr, "stats", NULL);
    if (!refusal && live)
        refusal = check_targets(ctx, &b, basestr, stats, completed, ds, live, &count, keep);
    if (refusal) {
        Emq_ReplyWithError(ctx, refusal);
        goto done;
    }
    if (live) complete(ctx, &b, basestr, active, completed, stats, ds, live, count, keep);

    /* an id repeated in one call answers what a second ack after the first would */
    again = keep ? NOT_ACTIVE : GONE;
    Emq_ReplyWithArray(ctx, (long)entries);
    for (i = 0; i < entries; i++) {
        const char *text = out[i];
        if (first[i] != i) text = out[first[i]] == NULL ? again : out[first[i]];
        if (text == NULL) Emq_ReplyWithLongLong(ctx, 1);
        else Emq_ReplyWithStringBuffer(ctx, text, strlen(text));
    }

done:
    Emq_Free(ds);
    Emq_Free(out);
    Emq_Free(slot);
    Emq_Free(first);
    bag_free(ctx, &b);
    return EMQ_OK;
}

int emq_hot_register(EmqCtx *ctx) {
    if (s_active == NULL) {
        s_active = Emq_CreateString(NULL, "active", 6);
        s_completed = Emq_CreateString(NULL, "completed", 9);
    }
    /* keys: EMQ.CLAIM and EMQ.ACKMANY name two, EMQ.ACK three (numkeys is argv[1]) */
    if (Emq_CreateCommand(ctx, "emq.claim", cmd_claim, "write deny-oom", 2, 3, 1) ||
        Emq_CreateCommand(ctx, "emq.ack", cmd_ack, "write deny-oom", 2, 4, 1) ||
        Emq_CreateCommand(ctx, "emq.ackmany", cmd_ackmany, "write deny-oom", 2, 3, 1))
        return EMQ_ERR;
    return EMQ_OK;
}

void emq_hot_unload(void) {
    if (s_active) {
        Emq_FreeString(NULL, s_active);
        Emq_FreeString(NULL, s_completed);
        s_active = s_completed = NULL;
    }
}
