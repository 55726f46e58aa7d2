/* emq.c: the EMQ module, native twins of EchoMQ's enqueue (its plain path), schedule,
 * promote and delay scripts, plus EMQ.RESCHEDULE, which has no scripted twin.
 *
 * Each command takes the scripts' EVALSHA tail: numkeys, the keys, then the arguments.
 *
 *   EMQ.ENQUEUE    2 <row> <pending> <id> <payload>                  -> 1 | 0
 *                  (a job with no options: priority, group, unique ride the script)
 *   EMQ.SCHEDULE   2 <row> <schedule> <id> <payload> <in|at> <due>   -> 1 | 0
 *   EMQ.PROMOTE    2 <schedule> <pending> <queue base> <batch>       -> count
 *                  (a flat row rejoins pending scored by its row's priority, as the script)
 *   EMQ.DELAY      3 <row> <active> <schedule> <id> <token> <in|at> <due> -> 1
 *   EMQ.RESCHEDULE 2 <row> <schedule> <id> <in|at> <due>             -> 1 | -1
 *
 * Contract: every check (shape, mode, due, the JOB fence, every row and key type, the
 * token, the state) runs before the first write, so a refusal writes nothing. EMQ.PROMOTE
 * reads every selected row before it writes any. The clock is the SERVER's
 * (Milliseconds(), read inside the command), as TIME is inside the scripts.
 *
 * Where we differ from the scripts (all visible to a caller, all documented in
 * README.md, "Where native and script differ"): a ghost (a scheduled id with no row) is
 * only removed from the schedule set; a grouped row refuses the call (EMQSTATE promote/delay lane not native); a mode
 * other than in/at, a negative or non-integer due, a due past year 9999 (for 'in', now +
 * due), a non-positive batch, a wrong numkeys
 * and repeated keys are refused (ERR EMQ.<VERB> ...); a delay whose holder is no longer
 * in active is refused (EMQSTATE delay not active); a key of the wrong type is refused
 * with WRONGTYPE before anything is written (a script would fail midway).
 *
 * Like the scripts (includes/seen.lua), EMQ.ENQUEUE and EMQ.SCHEDULE admit nothing (reply
 * 0) for an id on <base>seen within its window: deleted at its ack moments ago.
 *
 * Like the scripted enqueue and schedule, EMQ.ENQUEUE and EMQ.SCHEDULE bump the queue's
 * 'enqueued' counter on <base>stats (the base is the pending or schedule key minus its
 * last word).
 *
 * Like the scripts (includes/lead.lua), EMQ.SCHEDULE, EMQ.DELAY and EMQ.RESCHEDULE leave
 * one token on <base>due (RPUSH '1' when the list is empty) when the run-at they write is
 * below the schedule's head (or the schedule was empty), so a beat loop that planned its
 * wake at the old head re-plans it.
 *
 * Like the scripted enqueue and promote, EMQ.ENQUEUE and EMQ.PROMOTE leave one wake token
 * on <base>wake (RPUSH '1' when the list is empty) when they put at least one job on
 * pending, so a consumer blocked on that list claims at once.
 *
 * Replication: we replicate the EFFECTS, never the command verbatim. A verbatim EMQ.*
 * would be re-run on the replica (and on AOF replay) against that server's clock: an
 * 'in' schedule would be re-priced and a promote would select a different due set. So
 * every write is propagated as the plain command it amounts to (HSET, ZREM, ZADD with the
 * absolute score, RPUSH), which the server wraps in MULTI/EXEC when there are several.
 * The reads and writes themselves go through the low-level key API (no command dispatch,
 * no reply built and parsed), which is what makes the native promote cheaper than the
 * script; Call() is used once, for the wake RPUSH.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emq.h"

#define EMQ_VISIBLE __attribute__((visibility("default")))

const char KIND_ERROR[] = "EMQKIND job id must be JOB-namespaced";
const char WRONGTYPE_ERROR[] =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/* Values written into rows, and row field names for replicated writes, made once at load
 * (shared, never freed per call). */
static EmqStr *s_scheduled, *s_pending, *s_zero;
static EmqStr *f_state, *f_attempts, *f_payload, *f_priority, *f_unique, *f_unique_until,
    *f_notify;

/* -- small checks, none of which touches a key -------------------------------------- */

int str_is(const EmqStr *s, const char *lit) {
    size_t len, n = strlen(lit);
    const char *p = Emq_StringPtrLen(s, &len);
    return len == n && memcmp(p, lit, n) == 0;
}

int str_eq(const EmqStr *a, const EmqStr *b) {
    size_t la, lb;
    const char *pa = Emq_StringPtrLen(a, &la);
    const char *pb = Emq_StringPtrLen(b, &lb);
    return la == lb && memcmp(pa, pb, la) == 0;
}

int is_job(const EmqStr *id) {
    size_t len;
    const char *p = Emq_StringPtrLen(id, &len);
    return len >= 3 && memcmp(p, "JOB", 3) == 0;
}

/* 1 for 'in' (relative, priced on the server clock), 0 for 'at', -1 for anything else. */
static int parse_mode(const EmqStr *s) {
    if (str_is(s, "in")) return 1;
    if (str_is(s, "at")) return 0;
    return -1;
}

/* The latest instant a run-at may name: 9999-12-31T23:59:59.999Z in ms (the Python
 * guards' bound too), so a score always means a date a calendar can print. */
#define MAX_DUE_MS 253402300799999LL

static int parse_due(const EmqStr *s, long long *out) {
    return Emq_StringToLongLong(s, out) == EMQ_OK && *out >= 0;
}

/* 'in' adds to the server clock now, so the bound applies to the priced instant. */
static int due_in_range(int relative, long long due) {
    if (due > MAX_DUE_MS) return 0;
    return !relative || Emq_Milliseconds() <= MAX_DUE_MS - due;
}

/* The shape: the exact argc, numkeys as declared, and no key named twice (two handles on
 * one key could see each other's writes mid-command). */
int check_shape(EmqCtx *ctx, EmqStr **argv, int argc, int want_argc, int nkeys,
                       const char *numkeys_error, const char *distinct_error) {
    int i, j;
    if (argc != want_argc) {
        Emq_WrongArity(ctx);
        return 0;
    }
    {
        long long n;
        if (Emq_StringToLongLong(argv[1], &n) != EMQ_OK || n != nkeys) {
            Emq_ReplyWithError(ctx, numkeys_error);
            return 0;
        }
    }
    for (i = 2; i < 2 + nkeys; i++)
        for (j = i + 1; j < 2 + nkeys; j++)
            if (str_eq(argv[i], argv[j])) {
                Emq_ReplyWithError(ctx, distinct_error);
                return 0;
            }
    return 1;
}

/* The score a mode and due give: 'in' adds the due to the server clock now (in double
 * arithmetic, as the script's Lua numbers), 'at' takes it as an absolute ms. */
static double price(int relative, long long due) {
    if (relative) return (double)Emq_Milliseconds() + (double)due;
    return (double)due;
}

/* A score as the text we propagate: exact for every integer a double holds. */
void score_text(double score, char *buf, size_t size) { snprintf(buf, size, "%.17g", score); }

/* -- key reads ------------------------------------------------------------------------ */

int type_of(EmqCtx *ctx, EmqStr *name) {
    EmqKey *k = Emq_OpenKey(ctx, name, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    Emq_CloseKey(k);
    return t;
}

int is_type_or_empty(EmqCtx *ctx, EmqStr *name, int want) {
    int t = type_of(ctx, name);
    return t == EMQ_KEYTYPE_EMPTY || t == want;
}

int zset_has(EmqCtx *ctx, EmqStr *name, EmqStr *member) {
    double score;
    EmqKey *k = Emq_OpenKey(ctx, name, EMQ_READ);
    int found = 0;
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET)
        found = Emq_ZsetScore(k, member, &score) == EMQ_OK;
    Emq_CloseKey(k);
    return found;
}

/* -- key writes (low-level API; each caller replicates what it wrote) ------------------ */

/* Keyspace notifications, as the commands the script runs would publish them (one event
 * per key and kind of write in a call; the key API publishes none by itself). */
void notify(EmqCtx *ctx, int type, const char *event, EmqStr *key) {
    Emq_NotifyKeyspaceEvent(ctx, type, event, key);
}

/* "zrem", and "del" when that emptied the key (a ZREM of the last member deletes it). */
void notify_zrem(EmqCtx *ctx, EmqStr *key) {
    notify(ctx, EMQ_NOTIFY_ZSET, "zrem", key);
    if (type_of(ctx, key) == EMQ_KEYTYPE_EMPTY) notify(ctx, EMQ_NOTIFY_GENERIC, "del", key);
}

static void zset_add(EmqCtx *ctx, EmqStr *name, double score, EmqStr *member, int flags) {
    EmqKey *k = Emq_OpenKey(ctx, name, EMQ_READ | EMQ_WRITE);
    Emq_ZsetAdd(k, score, member, &flags);
    Emq_CloseKey(k);
}

static void zset_rem(EmqCtx *ctx, EmqStr *name, EmqStr *member) {
    int deleted = 0;
    EmqKey *k = Emq_OpenKey(ctx, name, EMQ_READ | EMQ_WRITE);
    if (Emq_KeyType(k) == EMQ_KEYTYPE_ZSET) Emq_ZsetRem(k, member, &deleted);
    Emq_CloseKey(k);
}

static void set_state(EmqCtx *ctx, EmqStr *row, EmqStr *state) {
    EmqKey *k = Emq_OpenKey(ctx, row, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "state", state, NULL);
    Emq_CloseKey(k);
}

/* The queue's counters, as the scripts keep them: an admission bumps 'enqueued' on
 * <base>stats, the base being the schedule key minus its 'schedule' suffix (same hash tag,
 * same slot). Through Call with "!" so the HINCRBY replicates as itself. */
static void count_enqueued(EmqCtx *ctx, EmqStr *sched) {
    size_t len;
    const char *p = Emq_StringPtrLen(sched, &len);
    static const char tail[] = "schedule";
    char *buf;
    EmqStr *key;
    EmqReply *r;
    if (len < sizeof(tail) - 1 || memcmp(p + len - (sizeof(tail) - 1), tail, sizeof(tail) - 1))
        return;
    buf = Emq_Alloc(len);
    memcpy(buf, p, len - (sizeof(tail) - 1));
    memcpy(buf + len - (sizeof(tail) - 1), "stats", 5);
    key = Emq_CreateString(ctx, buf, len - (sizeof(tail) - 1) + 5);
    Emq_Free(buf);
    r = Emq_Call(ctx, "HINCRBY", "!scc", key, "enqueued", "1");
    if (r) Emq_FreeCallReply(r);
    Emq_FreeString(ctx, key);
}

/* -- the schedule's head ---------------------------------------------------------------- */

/* 1 when a run-at of score would lead <schedule> (below its head's score, or the set is
 * empty), as the scripts' lead() (includes/lead.lua). Read before the write. */
static int leads(EmqCtx *ctx, EmqStr *sched, double score) {
    EmqKey *k = Emq_OpenKey(ctx, sched, EMQ_READ);
    int first = 1;
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET &&
        Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, HUGE_VAL, 0, 0) == EMQ_OK) {
        double head;
        EmqStr *m = Emq_ZsetRangeCurrentElement(k, &head);
        if (m) {
            first = score < head;
            Emq_FreeString(ctx, m);
        }
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    return first;
}

/* A beat loop plans its next wake at the earliest run-at it read, so a run-at that leads
 * the schedule leaves one token on <base>due (the schedule key minus 'schedule', same
 * slot), which an idle consumer pops beside its wake list to re-plan: the scripts' lead(). */
static void lead(EmqCtx *ctx, EmqStr *sched) {
    size_t len;
    const char *p = Emq_StringPtrLen(sched, &len);
    static const char tail[] = "schedule";
    size_t blen = len - (sizeof(tail) - 1);
    char *buf;
    EmqStr *key;
    if (len < sizeof(tail) - 1 || memcmp(p + blen, tail, sizeof(tail) - 1)) return;
    buf = Emq_Alloc(blen + 3);
    memcpy(buf, p, blen);
    memcpy(buf + blen, "due", 3);
    key = Emq_CreateString(ctx, buf, blen + 3);
    Emq_Free(buf);
    wake(ctx, key);
    Emq_FreeString(ctx, key);
}

/* An admission with the option tail (see "admissions with options" below). */
typedef struct AdmitVerb AdmitVerb;
static const AdmitVerb ENQUEUE_VERB, SCHEDULE_VERB;
static int cmd_admit(EmqCtx *ctx, EmqStr **argv, int argc, const AdmitVerb *v);

/* The seen mark's check (includes/seen.lua's seen_recently) for an admission whose set
 * key (pending, schedule) ends in `cut` bytes past the queue base: 1 when id was deleted
 * at its ack moments ago (the admission writes nothing, replies 0), 0 when not, -1 when
 * <base>seen is no sorted set (the script's ZSCORE fails: WRONGTYPE). */
static int seen_id(EmqCtx *ctx, EmqStr *set, size_t cut, EmqStr *id) {
    size_t len;
    const char *p = Emq_StringPtrLen(set, &len);
    EmqStr *seen = keyat(ctx, p, len > cut ? len - cut : 0, "seen", "", 0);
    int got = seen_recently(ctx, seen, id);
    Emq_FreeString(ctx, seen);
    return got;
}

/* -- EMQ.SCHEDULE 2 <row> <schedule> <id> <payload> <in|at> <due> ---------------------- */

static int cmd_schedule(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *row, *sched, *id;
    EmqKey *k;
    int relative, first;
    long long due;
    double score;
    char buf[40];

    if (argc == 13) return cmd_admit(ctx, argv, argc, &SCHEDULE_VERB);
    if (!check_shape(ctx, argv, argc, 8, 2, "ERR EMQ.SCHEDULE numkeys must be 2",
                     "ERR EMQ.SCHEDULE keys must be distinct"))
        return EMQ_OK;
    row = argv[2], sched = argv[3], id = argv[4];
    relative = parse_mode(argv[6]);
    if (relative < 0) return Emq_ReplyWithError(ctx, "ERR EMQ.SCHEDULE mode must be in or at");
    if (!parse_due(argv[7], &due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.SCHEDULE due must be a non-negative integer");
    if (!due_in_range(relative, due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.SCHEDULE due must be at most 253402300799999 (year 9999)");
    if (!is_job(id)) return Emq_ReplyWithError(ctx, KIND_ERROR);
    /* Idempotency, as the script: a recently deleted id or any existing row is a no-op. */
    first = seen_id(ctx, sched, 8, id);
    if (first) return first < 0 ? Emq_ReplyWithError(ctx, WRONGTYPE_ERROR)
                                : Emq_ReplyWithLongLong(ctx, 0);
    if (type_of(ctx, row) != EMQ_KEYTYPE_EMPTY) return Emq_ReplyWithLongLong(ctx, 0);
    if (!is_type_or_empty(ctx, sched, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);

    score = price(relative, due);
    first = leads(ctx, sched, score);
    k = Emq_OpenKey(ctx, row, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "state", s_scheduled, "attempts", s_zero, "payload",
                argv[5], NULL);
    Emq_CloseKey(k);
    zset_add(ctx, sched, score, id, 0);

    notify(ctx, EMQ_NOTIFY_HASH, "hset", row);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", sched);

    score_text(score, buf, sizeof(buf));
    Emq_Replicate(ctx, "HSET", "scccccs", row, "state", "scheduled", "attempts", "0",
                  "payload", argv[5]);
    Emq_Replicate(ctx, "ZADD", "scs", sched, buf, id);
    count_enqueued(ctx, sched);
    if (first) lead(ctx, sched);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- EMQ.PROMOTE 2 <schedule> <pending> <queue base> <batch> -------------------------- */

/* What the replicas and the AOF run for the promoted rows' state writes (see below). */
static const char SET_PENDING_LUA[] =
    "for _, k in ipairs(KEYS) do redis.call('HSET', k, 'state', 'pending') end";

enum { ROW_FLAT = 0, ROW_GHOST = 1 };

typedef struct {
    size_t n;
    EmqStr **ids;
    EmqStr **rows;
    unsigned char *kind;
    EmqStr **prio;   /* a flat row's priority as written on it, NULL for none (score 0) */
    EmqStr **pairs; /* score, id, score, id ... for the replicated ZADD */
} Selection;

static void selection_free(EmqCtx *ctx, Selection *sel) {
    size_t i;
    for (i = 0; i < sel->n; i++) {
        if (sel->ids && sel->ids[i]) Emq_FreeString(ctx, sel->ids[i]);
        if (sel->rows && sel->rows[i]) Emq_FreeString(ctx, sel->rows[i]);
        if (sel->prio && sel->prio[i]) Emq_FreeString(ctx, sel->prio[i]);
    }
    if (sel->prio) Emq_Free(sel->prio);
    if (sel->ids) Emq_Free(sel->ids);
    if (sel->rows) Emq_Free(sel->rows);
    if (sel->kind) Emq_Free(sel->kind);
    if (sel->pairs) Emq_Free(sel->pairs);
}

/* The key <base><suffix>, made from a reusable buffer. */
static EmqStr *derive(EmqCtx *ctx, char *buf, const char *base, size_t blen, const char *mid,
                      const char *tail, size_t tlen) {
    size_t mlen = strlen(mid);
    memcpy(buf, base, blen);
    memcpy(buf + blen, mid, mlen);
    memcpy(buf + blen + mlen, tail, tlen);
    return Emq_CreateString(ctx, buf, blen + mlen + tlen);
}

/* Leave one wake token for blocked consumers, as the script's wake(): RPUSH only when the
 * list is empty. A wake key of another type is skipped: the token is a hint, and a missed
 * one costs a consumer at most one beat. RPUSH goes through Call so BLPOP waiters wake and
 * the push is replicated ("!"). */
void wake(EmqCtx *ctx, EmqStr *key) {
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    size_t len = (t == EMQ_KEYTYPE_LIST) ? Emq_ValueLength(k) : 0;
    Emq_CloseKey(k);
    if (t == EMQ_KEYTYPE_EMPTY || (t == EMQ_KEYTYPE_LIST && len == 0)) {
        EmqReply *r = Emq_Call(ctx, "RPUSH", "!sc", key, "1");
        if (r) Emq_FreeCallReply(r);
    }
}

static int cmd_promote(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *sched, *pending, *wake_key;
    EmqKey *k;
    const char *base;
    size_t blen, i, cap, flat = 0, maxlen = 0;
    long long batch;
    Selection sel;
    char *buf;
    const char *refusal = NULL;

    if (!check_shape(ctx, argv, argc, 6, 2, "ERR EMQ.PROMOTE numkeys must be 2",
                     "ERR EMQ.PROMOTE keys must be distinct"))
        return EMQ_OK;
    sched = argv[2], pending = argv[3];
    if (Emq_StringToLongLong(argv[5], &batch) != EMQ_OK || batch <= 0)
        return Emq_ReplyWithError(ctx, "ERR EMQ.PROMOTE batch must be a positive integer");
    if (!is_type_or_empty(ctx, sched, EMQ_KEYTYPE_ZSET) ||
        !is_type_or_empty(ctx, pending, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);

    /* The due read, on the server clock: members scored at or before now (ZRANGEBYSCORE
     * -inf now LIMIT 0 batch: score order, then member order), up to the batch. Walked
     * with the key API's range iterator, so no reply is built and parsed. */
    memset(&sel, 0, sizeof(sel));
    k = Emq_OpenKey(ctx, sched, EMQ_READ);
    if (k == NULL || Emq_KeyType(k) != EMQ_KEYTYPE_ZSET) {
        Emq_CloseKey(k);
        return Emq_ReplyWithLongLong(ctx, 0);
    }
    cap = Emq_ValueLength(k);
    if ((unsigned long long)batch < cap) cap = (size_t)batch;
    if (cap == 0 || Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, (double)Emq_Milliseconds(), 0, 0) !=
                        EMQ_OK) {
        Emq_CloseKey(k);
        return Emq_ReplyWithLongLong(ctx, 0);
    }
    sel.ids = Emq_Alloc(sizeof(EmqStr *) * cap);
    while (sel.n < cap && !Emq_ZsetRangeEndReached(k)) {
        size_t len;
        sel.ids[sel.n] = Emq_ZsetRangeCurrentElement(k, NULL);
        Emq_StringPtrLen(sel.ids[sel.n], &len);
        if (len > maxlen) maxlen = len;
        sel.n++;
        if (!Emq_ZsetRangeNext(k)) break;
    }
    Emq_ZsetRangeStop(k);
    Emq_CloseKey(k);
    if (sel.n == 0) {
        selection_free(ctx, &sel);
        return Emq_ReplyWithLongLong(ctx, 0);
    }

    /* Read every selected row before writing anything. */
    base = Emq_StringPtrLen(argv[4], &blen);
    buf = Emq_Alloc(blen + maxlen + 8);
    sel.rows = Emq_Alloc(sizeof(EmqStr *) * sel.n);
    sel.kind = Emq_Alloc(sel.n);
    sel.prio = Emq_Alloc(sizeof(EmqStr *) * sel.n);
    memset(sel.rows, 0, sizeof(EmqStr *) * sel.n);
    memset(sel.prio, 0, sizeof(EmqStr *) * sel.n);
    for (i = 0; i < sel.n && refusal == NULL; i++) {
        size_t len;
        const char *p = Emq_StringPtrLen(sel.ids[i], &len);
        int t;
        sel.rows[i] = derive(ctx, buf, base, blen, "job:", p, len);
        k = Emq_OpenKey(ctx, sel.rows[i], EMQ_READ);
        t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
        if (t == EMQ_KEYTYPE_EMPTY) {
            sel.kind[i] = ROW_GHOST;
        } else if (t != EMQ_KEYTYPE_HASH) {
            refusal = WRONGTYPE_ERROR;
        } else {
            EmqStr *group = NULL;
            long long pri;
            /* One lookup for both fields: a group (any value) refuses the call; the
             * pending score is the row's priority, absent (or not an integer, as the
             * script's tonumber() would read it) 0. The field's own text is the score we
             * replicate, so it is kept only when it is a plain integer. */
            Emq_HashGet(k, EMQ_HASH_CFIELDS, "group", &group, "priority", &sel.prio[i], NULL);
            if (group) {
                refusal = "EMQSTATE promote lane not native";
                Emq_FreeString(ctx, group);
            }
            if (sel.prio[i] && (Emq_StringToLongLong(sel.prio[i], &pri) != EMQ_OK || pri == 0)) {
                Emq_FreeString(ctx, sel.prio[i]);
                sel.prio[i] = NULL;
            }
            sel.kind[i] = ROW_FLAT;
            flat++;
        }
        Emq_CloseKey(k);
    }
    if (refusal != NULL) {
        Emq_Free(buf);
        selection_free(ctx, &sel);
        return Emq_ReplyWithError(ctx, refusal);
    }
    wake_key = derive(ctx, buf, base, blen, "wake", "", 0);
    Emq_Free(buf);

    /* The writes: leave the schedule set; flat rows rejoin pending at their priority,
     * written pending. */
    {
        int deleted;
        k = Emq_OpenKey(ctx, sched, EMQ_READ | EMQ_WRITE);
        for (i = 0; i < sel.n; i++) Emq_ZsetRem(k, sel.ids[i], &deleted);
        Emq_CloseKey(k);
    }
    notify_zrem(ctx, sched);
    Emq_Replicate(ctx, "ZREM", "sv", sched, sel.ids, sel.n);
    if (flat > 0) {
        size_t j = 0;
        k = Emq_OpenKey(ctx, pending, EMQ_READ | EMQ_WRITE);
        sel.pairs = Emq_Alloc(sizeof(EmqStr *) * 2 * flat);
        for (i = 0; i < sel.n; i++) {
            int flags = 0;
            long long pri = 0;
            if (sel.kind[i] != ROW_FLAT) continue;
            if (sel.prio[i]) Emq_StringToLongLong(sel.prio[i], &pri);
            Emq_ZsetAdd(k, (double)pri, sel.ids[i], &flags);
            sel.pairs[j++] = sel.prio[i] ? sel.prio[i] : s_zero;
            sel.pairs[j++] = sel.ids[i];
        }
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_ZSET, "zadd", pending);
        Emq_Replicate(ctx, "ZADD", "sv", pending, sel.pairs, j);
        j = 0;
        for (i = 0; i < sel.n; i++) {
            if (sel.kind[i] != ROW_FLAT) continue;
            set_state(ctx, sel.rows[i], s_pending);
            notify(ctx, EMQ_NOTIFY_HASH, "hset", sel.rows[i]);
            sel.pairs[j++] = sel.rows[i]; /* reused: the flat rows, for one replicated write */
        }
        /* One replicated command writes every row's state: a fixed script over the rows as
         * KEYS (deterministic, no clock), instead of one HSET per row. Replicas and AOF
         * replay need no module for it, and it costs the primary one propagation. */
        Emq_Replicate(ctx, "EVAL", "clv", SET_PENDING_LUA, (long long)j, sel.pairs, j);
        wake(ctx, wake_key);
    }
    Emq_FreeString(ctx, wake_key);
    Emq_ReplyWithLongLong(ctx, (long long)sel.n);
    selection_free(ctx, &sel);
    return EMQ_OK;
}

/* -- EMQ.DELAY 3 <row> <active> <schedule> <id> <token> <in|at> <due> ---------------- */

static int cmd_delay(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *row, *active, *sched, *id, *att = NULL;
    EmqKey *k;
    int relative, t, grouped = 0, first;
    long long due;
    double score;
    char buf[40];
    const char *refusal = NULL;

    if (!check_shape(ctx, argv, argc, 9, 3, "ERR EMQ.DELAY numkeys must be 3",
                     "ERR EMQ.DELAY keys must be distinct"))
        return EMQ_OK;
    row = argv[2], active = argv[3], sched = argv[4], id = argv[5];
    relative = parse_mode(argv[7]);
    if (relative < 0) return Emq_ReplyWithError(ctx, "ERR EMQ.DELAY mode must be in or at");
    if (!parse_due(argv[8], &due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.DELAY due must be a non-negative integer");
    if (!due_in_range(relative, due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.DELAY due must be at most 253402300799999 (year 9999)");
    if (!is_job(id)) return Emq_ReplyWithError(ctx, KIND_ERROR);

    /* The token fence: the row's attempts, compared as bytes (the script compares strings). */
    k = Emq_OpenKey(ctx, row, EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    if (t == EMQ_KEYTYPE_HASH) {
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "attempts", &att, NULL);
        Emq_HashGet(k, EMQ_HASH_CFIELDS | EMQ_HASH_EXISTS, "group", &grouped, NULL);
    }
    Emq_CloseKey(k);
    if (t != EMQ_KEYTYPE_HASH && t != EMQ_KEYTYPE_EMPTY)
        refusal = WRONGTYPE_ERROR;
    else if (att == NULL)
        refusal = "EMQSTALE job gone";
    else if (!str_eq(att, argv[6]))
        refusal = "EMQSTALE delay token mismatch";
    else if (grouped)
        refusal = "EMQSTATE delay lane not native";
    else if (!is_type_or_empty(ctx, active, EMQ_KEYTYPE_ZSET) ||
             !is_type_or_empty(ctx, sched, EMQ_KEYTYPE_ZSET))
        refusal = WRONGTYPE_ERROR;
    else if (!zset_has(ctx, active, id))
        refusal = "EMQSTATE delay not active";
    if (att) Emq_FreeString(ctx, att);
    if (refusal) return Emq_ReplyWithError(ctx, refusal);

    score = price(relative, due);
    first = leads(ctx, sched, score);
    zset_rem(ctx, active, id);
    notify_zrem(ctx, active);
    set_state(ctx, row, s_scheduled);
    notify(ctx, EMQ_NOTIFY_HASH, "hset", row);
    zset_add(ctx, sched, score, id, 0);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", sched);

    score_text(score, buf, sizeof(buf));
    Emq_Replicate(ctx, "ZREM", "ss", active, id);
    Emq_Replicate(ctx, "HSET", "scc", row, "state", "scheduled");
    Emq_Replicate(ctx, "ZADD", "scs", sched, buf, id);
    if (first) lead(ctx, sched);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- EMQ.RESCHEDULE 2 <row> <schedule> <id> <in|at> <due> ---------------------------- */

static int cmd_reschedule(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *row, *sched, *id;
    int relative, t, first;
    long long due;
    double score;
    char buf[40];

    if (!check_shape(ctx, argv, argc, 7, 2, "ERR EMQ.RESCHEDULE numkeys must be 2",
                     "ERR EMQ.RESCHEDULE keys must be distinct"))
        return EMQ_OK;
    row = argv[2], sched = argv[3], id = argv[4];
    relative = parse_mode(argv[5]);
    if (relative < 0) return Emq_ReplyWithError(ctx, "ERR EMQ.RESCHEDULE mode must be in or at");
    if (!parse_due(argv[6], &due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.RESCHEDULE due must be a non-negative integer");
    if (!due_in_range(relative, due))
        return Emq_ReplyWithError(ctx, "ERR EMQ.RESCHEDULE due must be at most 253402300799999 (year 9999)");
    if (!is_job(id)) return Emq_ReplyWithError(ctx, KIND_ERROR);
    t = type_of(ctx, row);
    if (t == EMQ_KEYTYPE_EMPTY) return Emq_ReplyWithLongLong(ctx, -1);
    if (t != EMQ_KEYTYPE_HASH || !is_type_or_empty(ctx, sched, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    if (!zset_has(ctx, sched, id))
        return Emq_ReplyWithError(ctx, "EMQSTATE reschedule not scheduled");

    /* The one write: rescore the member, never add it (ZADD ... XX). */
    score = price(relative, due);
    first = leads(ctx, sched, score);
    zset_add(ctx, sched, score, id, EMQ_ZADD_XX);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", sched);
    score_text(score, buf, sizeof(buf));
    Emq_Replicate(ctx, "ZADD", "sccs", sched, "XX", buf, id);
    if (first) lead(ctx, sched);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- EMQ.ENQUEUE 2 <row> <pending> <id> <payload> -------------------------------------- */

/* The key <base><name>, the base being <key> minus its last <cut> bytes, as the scripts
 * derive it (string.sub(KEYS[2], 1, -8) for 'pending'). */
static EmqStr *sibling(EmqCtx *ctx, EmqStr *key, size_t cut, const char *name) {
    size_t len, nlen = strlen(name), blen;
    const char *p = Emq_StringPtrLen(key, &len);
    char stack[256], *buf = stack;
    EmqStr *out;
    blen = len > cut ? len - cut : 0;
    if (blen + nlen > sizeof(stack)) buf = Emq_Alloc(blen + nlen);
    memcpy(buf, p, blen);
    memcpy(buf + blen, name, nlen);
    out = Emq_CreateString(ctx, buf, blen + nlen);
    if (buf != stack) Emq_Free(buf);
    return out;
}

/* The 'enqueued' counter's value before the bump (0 when the field or the hash is absent);
 * NULL when it can be bumped, else the refusal HINCRBY itself would give (WRONGTYPE, not an
 * integer, overflow). Read before any write, so a refusal writes nothing. */
static const char *counter_before(EmqCtx *ctx, EmqStr *stats, long long *out) {
    EmqKey *k = Emq_OpenKey(ctx, stats, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    const char *refusal = NULL;
    EmqStr *v = NULL;
    *out = 0;
    if (t == EMQ_KEYTYPE_HASH) Emq_HashGet(k, EMQ_HASH_CFIELDS, "enqueued", &v, NULL);
    else if (t != EMQ_KEYTYPE_EMPTY) refusal = WRONGTYPE_ERROR;
    Emq_CloseKey(k);
    if (v != NULL) {
        if (Emq_StringToLongLong(v, out) != EMQ_OK) refusal = "ERR hash value is not an integer";
        else if (*out == 0x7fffffffffffffffLL) refusal = "ERR increment or decrement would overflow";
        Emq_FreeString(ctx, v);
    }
    return refusal;
}

/* Admit a job claimable now, the enqueue script's plain path (no options) in one command:
 * the row (state pending, attempts 0, payload) unless the key exists, the id on pending at
 * score 0, one wake token, and 'enqueued' + 1 on <base>stats. Replies 1, or 0 when the row
 * exists (of any type; nothing written). Each key is opened once to check and once to
 * write; no command is dispatched except the wake RPUSH when the list is empty. */
static int cmd_enqueue(EmqCtx *ctx, EmqStr **argv, int argc) {
    EmqStr *row, *pending, *id, *stats, *wake_key, *bumped;
    EmqKey *k;
    long long count;
    const char *refusal;
    char num[24];
    int flags = 0, n;

    if (argc == 11) return cmd_admit(ctx, argv, argc, &ENQUEUE_VERB);
    if (!check_shape(ctx, argv, argc, 6, 2, "ERR EMQ.ENQUEUE numkeys must be 2",
                     "ERR EMQ.ENQUEUE keys must be distinct"))
        return EMQ_OK;
    row = argv[2], pending = argv[3], id = argv[4];
    if (!is_job(id)) return Emq_ReplyWithError(ctx, KIND_ERROR);
    /* Idempotency, as the script: a recently deleted id or any existing row is a no-op. */
    n = seen_id(ctx, pending, 7, id);
    if (n) return n < 0 ? Emq_ReplyWithError(ctx, WRONGTYPE_ERROR) : Emq_ReplyWithLongLong(ctx, 0);
    if (type_of(ctx, row) != EMQ_KEYTYPE_EMPTY) return Emq_ReplyWithLongLong(ctx, 0);
    if (!is_type_or_empty(ctx, pending, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    stats = sibling(ctx, pending, 7, "stats");
    refusal = counter_before(ctx, stats, &count);
    if (refusal) {
        Emq_FreeString(ctx, stats);
        return Emq_ReplyWithError(ctx, refusal);
    }

    k = Emq_OpenKey(ctx, row, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "state", s_pending, "attempts", s_zero, "payload",
                argv[5], NULL);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_HASH, "hset", row);
    Emq_Replicate(ctx, "HSET", "scccccs", row, "state", "pending", "attempts", "0",
                  "payload", argv[5]);

    k = Emq_OpenKey(ctx, pending, EMQ_READ | EMQ_WRITE);
    Emq_ZsetAdd(k, 0.0, id, &flags);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", pending);
    Emq_Replicate(ctx, "ZADD", "scs", pending, "0", id);

    wake_key = sibling(ctx, pending, 7, "wake");
    wake(ctx, wake_key);
    Emq_FreeString(ctx, wake_key);

    /* HINCRBY through the key API: the value read above plus one, replicated as itself. */
    n = snprintf(num, sizeof(num), "%lld", count + 1);
    bumped = Emq_CreateString(ctx, num, (size_t)n);
    k = Emq_OpenKey(ctx, stats, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "enqueued", bumped, NULL);
    Emq_CloseKey(k);
    Emq_FreeString(ctx, bumped);
    notify(ctx, EMQ_NOTIFY_HASH, "hincrby", stats);
    Emq_Replicate(ctx, "HINCRBY", "scc", stats, "enqueued", "1");
    Emq_FreeString(ctx, stats);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- admissions with options: EMQ.ENQUEUE / EMQ.SCHEDULE + the option tail ------------- */

/*   EMQ.ENQUEUE  2 <row> <pending>  <id> <payload>             <priority> <group> <unique>
 *                                                               <unique_for> <notify>
 *   EMQ.SCHEDULE 2 <row> <schedule> <id> <payload> <in|at> <due> <the same five>
 *
 * The scripts' admit() (includes/admit.lua) for a flat job: the option tail is the
 * scripts' ('' = none) and so are the writes, the reply (1, 0 when the id has a row, or
 * the OWNER's id when a live job owns the unique key) and the row's fields in their order.
 * A group is the scripts' (its lane and ring): EMQSTATE <verb> lane not native, nothing
 * written, and the caller sends the script (it never sends a group here). Native-only
 * refusals of what the scripts would coerce: a priority outside 0..1000000 or not an
 * integer, a unique_for or notify that is not a positive integer. */

#define MAX_PRIORITY 1000000LL

struct AdmitVerb {
    int scheduled; /* 0: claimable now (pending); 1: the schedule set */
    size_t cut;    /* the set key's last word ('pending' 7, 'schedule' 8): the queue base */
    const char *numkeys, *distinct, *priority, *lane, *unique_for, *notify;
};

static const AdmitVerb ENQUEUE_VERB = {
    0, 7, "ERR EMQ.ENQUEUE numkeys must be 2", "ERR EMQ.ENQUEUE keys must be distinct",
    "ERR EMQ.ENQUEUE priority must be an integer 0..1000000", "EMQSTATE enqueue lane not native",
    "ERR EMQ.ENQUEUE unique_for must be a positive integer",
    "ERR EMQ.ENQUEUE notify must be a positive integer"};
static const AdmitVerb SCHEDULE_VERB = {
    1, 8, "ERR EMQ.SCHEDULE numkeys must be 2", "ERR EMQ.SCHEDULE keys must be distinct",
    "ERR EMQ.SCHEDULE priority must be an integer 0..1000000", "EMQSTATE schedule lane not native",
    "ERR EMQ.SCHEDULE unique_for must be a positive integer",
    "ERR EMQ.SCHEDULE notify must be a positive integer"};

typedef struct {
    long long priority;  /* 0: none (not written; score 0) */
    EmqStr *unique;      /* the unique key, NULL for none */
    long long unique_for; /* ms, -1 for none */
    EmqStr *notify;      /* ms as given, NULL for none */
} Opts;

static int is_empty(const EmqStr *s) {
    size_t n;
    Emq_StringPtrLen(s, &n);
    return n == 0;
}

/* The option tail t[0..4]: NULL, or the refusal. unique_for without a unique key is
 * ignored, as the script ignores it. */
static const char *parse_opts(EmqStr **t, const AdmitVerb *v, Opts *o) {
    long long n;
    o->priority = 0, o->unique = NULL, o->unique_for = -1, o->notify = NULL;
    if (!is_empty(t[0])) {
        if (Emq_StringToLongLong(t[0], &n) != EMQ_OK || n < 0 || n > MAX_PRIORITY)
            return v->priority;
        o->priority = n;
    }
    if (!is_empty(t[1])) return v->lane;
    if (!is_empty(t[2])) o->unique = t[2];
    if (!is_empty(t[3])) {
        if (Emq_StringToLongLong(t[3], &n) != EMQ_OK || n < 1) return v->unique_for;
        if (o->unique) o->unique_for = n;
    }
    if (!is_empty(t[4])) {
        if (Emq_StringToLongLong(t[4], &n) != EMQ_OK || n < 1) return v->notify;
        o->notify = t[4];
    }
    return NULL;
}

/* <base><mid><tail>, allocated (the caller frees it). */
EmqStr *keyat(EmqCtx *ctx, const char *base, size_t blen, const char *mid,
                     const char *tail, size_t tlen) {
    size_t mlen = strlen(mid);
    char stack[256], *buf = stack;
    EmqStr *out;
    if (blen + mlen + tlen > sizeof(stack)) buf = Emq_Alloc(blen + mlen + tlen);
    memcpy(buf, base, blen);
    memcpy(buf + blen, mid, mlen);
    if (tlen) memcpy(buf + blen + mlen, tail, tlen);
    out = Emq_CreateString(ctx, buf, blen + mlen + tlen);
    if (buf != stack) Emq_Free(buf);
    return out;
}

static int is_live_state(const EmqStr *st) {
    return str_is(st, "pending") || str_is(st, "scheduled") || str_is(st, "active") ||
           str_is(st, "waiting-children") || str_is(st, "waiting");
}

/* The live owner of the unique key uk, as the scripts' unique_owner(): the id it holds
 * when that job's row is waiting, running or waiting for its children, or when the key's
 * TTL (a unique_for window) still runs; NULL when the key is free or stale. A key or row
 * of another type sets *refusal (the script's GET / HGET would fail there). */
static EmqStr *unique_owner(EmqCtx *ctx, EmqStr *uk, const char *base, size_t blen,
                            const char **refusal) {
    EmqKey *k = Emq_OpenKey(ctx, uk, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY, live = 0;
    long long ttl = EMQ_NO_EXPIRE;
    EmqStr *owner = NULL, *row, *state = NULL;
    EmqReply *r;
    size_t len;
    const char *p;
    if (t == EMQ_KEYTYPE_STRING) ttl = Emq_GetExpire(k);
    Emq_CloseKey(k);
    if (t == EMQ_KEYTYPE_EMPTY) return NULL;
    if (t != EMQ_KEYTYPE_STRING) {
        *refusal = WRONGTYPE_ERROR;
        return NULL;
    }
    /* GET through the call API: reading a string through the key API may re-encode it */
    r = Emq_Call(ctx, "GET", "s", uk);
    if (r == NULL || Emq_CallReplyType(r) != EMQ_REPLY_STRING) {
        if (r) Emq_FreeCallReply(r);
        return NULL;
    }
    p = Emq_CallReplyStringPtr(r, &len);
    owner = Emq_CreateString(ctx, p, len);
    row = keyat(ctx, base, blen, "job:", p, len);
    Emq_FreeCallReply(r);
    k = Emq_OpenKey(ctx, row, EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    if (t == EMQ_KEYTYPE_HASH) {
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "state", &state, NULL);
        if (state) live = is_live_state(state);
    } else if (t != EMQ_KEYTYPE_EMPTY) {
        *refusal = WRONGTYPE_ERROR;
    }
    Emq_CloseKey(k);
    Emq_FreeString(ctx, row);
    if (state) Emq_FreeString(ctx, state);
    if (*refusal == NULL && (live || ttl > 0)) return owner;
    Emq_FreeString(ctx, owner);
    return NULL;
}

EmqStr *num_str(EmqCtx *ctx, long long n) {
    char buf[24];
    int len = snprintf(buf, sizeof(buf), "%lld", n);
    return Emq_CreateString(ctx, buf, (size_t)len);
}

/* The admission itself. Checks, in order: the shape, the mode and due (schedule), the
 * options, the JOB fence, the row (any key: 0), the set's type, the unique key (its
 * type, its owner's row type; a live owner: its id), the counter; then the writes: the row
 * in the script's field order (state, attempts, payload, priority, then unique,
 * unique_until, notify), the unique key (SET: no TTL while the job lives), the set member
 * (pending at the priority, or the schedule at the run-at), the wake token (pending) or
 * the due token (a run-at that leads the schedule), 'enqueued' + 1. */
static int cmd_admit(EmqCtx *ctx, EmqStr **argv, int argc, const AdmitVerb *v) {
    EmqStr *row, *set, *id, *payload, *uk = NULL, *owner = NULL, *stats, *wk;
    EmqStr *prio = NULL, *until = NULL, *bumped, *fields[14];
    EmqKey *k;
    Opts o;
    const char *refusal = NULL, *base;
    int first_opt = v->scheduled ? 8 : 6, relative = 0, first = 0, flags = 0, nf = 0;
    long long due = 0, count;
    size_t blen;
    double score;
    char sbuf[40];

    if (!check_shape(ctx, argv, argc, first_opt + 5, 2, v->numkeys, v->distinct)) return EMQ_OK;
    row = argv[2], set = argv[3], id = argv[4], payload = argv[5];
    if (v->scheduled) {
        relative = parse_mode(argv[6]);
        if (relative < 0) return Emq_ReplyWithError(ctx, "ERR EMQ.SCHEDULE mode must be in or at");
        if (!parse_due(argv[7], &due))
            return Emq_ReplyWithError(ctx, "ERR EMQ.SCHEDULE due must be a non-negative integer");
        if (!due_in_range(relative, due))
            return Emq_ReplyWithError(
                ctx, "ERR EMQ.SCHEDULE due must be at most 253402300799999 (year 9999)");
    }
    refusal = parse_opts(argv + first_opt, v, &o);
    if (refusal) return Emq_ReplyWithError(ctx, refusal);
    if (!is_job(id)) return Emq_ReplyWithError(ctx, KIND_ERROR);
    /* Idempotency, as the script: any existing row (of any type) is a no-op. */
    if (type_of(ctx, row) != EMQ_KEYTYPE_EMPTY) return Emq_ReplyWithLongLong(ctx, 0);
    if (!is_type_or_empty(ctx, set, EMQ_KEYTYPE_ZSET))
        return Emq_ReplyWithError(ctx, WRONGTYPE_ERROR);
    base = Emq_StringPtrLen(set, &blen);
    blen = blen > v->cut ? blen - v->cut : 0;
    first = seen_id(ctx, set, v->cut, id); /* after the row, as admit() */
    if (first) return first < 0 ? Emq_ReplyWithError(ctx, WRONGTYPE_ERROR)
                                : Emq_ReplyWithLongLong(ctx, 0);
    if (o.unique) {
        size_t ulen;
        const char *u = Emq_StringPtrLen(o.unique, &ulen);
        uk = keyat(ctx, base, blen, "unique:", u, ulen);
        owner = unique_owner(ctx, uk, base, blen, &refusal);
        if (refusal || owner) {
            Emq_FreeString(ctx, uk);
            if (refusal) return Emq_ReplyWithError(ctx, refusal);
            Emq_ReplyWithString(ctx, owner);
            Emq_FreeString(ctx, owner);
            return EMQ_OK;
        }
    }
    stats = keyat(ctx, base, blen, "stats", "", 0);
    refusal = counter_before(ctx, stats, &count);
    if (refusal) {
        Emq_FreeString(ctx, stats);
        if (uk) Emq_FreeString(ctx, uk);
        return Emq_ReplyWithError(ctx, refusal);
    }

    /* the row, one HashSet per field so the hash keeps the script's field order */
    k = Emq_OpenKey(ctx, row, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "state", v->scheduled ? s_scheduled : s_pending,
                "attempts", s_zero, "payload", payload, NULL);
    fields[nf++] = f_state, fields[nf++] = v->scheduled ? s_scheduled : s_pending;
    fields[nf++] = f_attempts, fields[nf++] = s_zero;
    fields[nf++] = f_payload, fields[nf++] = payload;
    if (o.priority) {
        prio = num_str(ctx, o.priority);
        Emq_HashSet(k, EMQ_HASH_CFIELDS, "priority", prio, NULL);
        fields[nf++] = f_priority, fields[nf++] = prio;
    }
    if (o.unique) {
        Emq_HashSet(k, EMQ_HASH_CFIELDS, "unique", o.unique, NULL);
        fields[nf++] = f_unique, fields[nf++] = o.unique;
        if (o.unique_for >= 0) {
            until = num_str(ctx, Emq_Milliseconds() + o.unique_for);
            Emq_HashSet(k, EMQ_HASH_CFIELDS, "unique_until", until, NULL);
            fields[nf++] = f_unique_until, fields[nf++] = until;
        }
    }
    if (o.notify) {
        Emq_HashSet(k, EMQ_HASH_CFIELDS, "notify", o.notify, NULL);
        fields[nf++] = f_notify, fields[nf++] = o.notify;
    }
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_HASH, "hset", row);
    Emq_Replicate(ctx, "HSET", "sv", row, fields, (size_t)nf);

    if (uk) {
        k = Emq_OpenKey(ctx, uk, EMQ_READ | EMQ_WRITE);
        Emq_StringSet(k, id); /* drops any TTL, as SET does */
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_STRING, "set", uk);
        Emq_Replicate(ctx, "SET", "ss", uk, id);
    }

    if (v->scheduled) {
        score = price(relative, due);
        first = leads(ctx, set, score);
    } else {
        score = (double)o.priority;
    }
    k = Emq_OpenKey(ctx, set, EMQ_READ | EMQ_WRITE);
    Emq_ZsetAdd(k, score, id, &flags);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_ZSET, "zadd", set);
    score_text(score, sbuf, sizeof(sbuf));
    Emq_Replicate(ctx, "ZADD", "scs", set, sbuf, id);
    if (v->scheduled) {
        if (first) lead(ctx, set);
    } else {
        wk = keyat(ctx, base, blen, "wake", "", 0);
        wake(ctx, wk);
        Emq_FreeString(ctx, wk);
    }

    bumped = num_str(ctx, count + 1);
    k = Emq_OpenKey(ctx, stats, EMQ_READ | EMQ_WRITE);
    Emq_HashSet(k, EMQ_HASH_CFIELDS, "enqueued", bumped, NULL);
    Emq_CloseKey(k);
    notify(ctx, EMQ_NOTIFY_HASH, "hincrby", stats);
    Emq_Replicate(ctx, "HINCRBY", "scc", stats, "enqueued", "1");

    Emq_FreeString(ctx, bumped);
    Emq_FreeString(ctx, stats);
    if (prio) Emq_FreeString(ctx, prio);
    if (until) Emq_FreeString(ctx, until);
    if (uk) Emq_FreeString(ctx, uk);
    return Emq_ReplyWithLongLong(ctx, 1);
}

/* -- load / unload ------------------------------------------------------------------- */

static int load(EmqCtx *ctx) {
    if (emq_api_init(ctx) != EMQ_OK) return EMQ_ERR;
    if (Emq_IsModuleNameBusy("emq")) return EMQ_ERR;
    Emq_SetModuleAttribs(ctx, "emq", 1, EMQ_APIVER_1);
    if (s_scheduled == NULL) {
        s_scheduled = Emq_CreateString(NULL, "scheduled", 9);
        s_pending = Emq_CreateString(NULL, "pending", 7);
        s_zero = Emq_CreateString(NULL, "0", 1);
        f_state = Emq_CreateString(NULL, "state", 5);
        f_attempts = Emq_CreateString(NULL, "attempts", 8);
        f_payload = Emq_CreateString(NULL, "payload", 7);
        f_priority = Emq_CreateString(NULL, "priority", 8);
        f_unique = Emq_CreateString(NULL, "unique", 6);
        f_unique_until = Emq_CreateString(NULL, "unique_until", 12);
        f_notify = Emq_CreateString(NULL, "notify", 6);
    }
    /* Key positions (first, last, step) so a cluster routes on them: numkeys is argv[1]
     * and the keys follow it. Flagged write + deny-oom: replicas and the AOF see the
     * effects, and a full server refuses new writes. */
    if (Emq_CreateCommand(ctx, "emq.schedule", cmd_schedule, "write deny-oom", 2, 3, 1) ||
        Emq_CreateCommand(ctx, "emq.promote", cmd_promote, "write deny-oom", 2, 3, 1) ||
        Emq_CreateCommand(ctx, "emq.delay", cmd_delay, "write deny-oom", 2, 4, 1) ||
        Emq_CreateCommand(ctx, "emq.reschedule", cmd_reschedule, "write deny-oom", 2, 3, 1) ||
        Emq_CreateCommand(ctx, "emq.enqueue", cmd_enqueue, "write deny-oom", 2, 3, 1) ||
        emq_hot_register(ctx) != EMQ_OK)
        return EMQ_ERR;
    return EMQ_OK;
}

static int unload(void) {
    emq_hot_unload();
    if (s_scheduled) {
        Emq_FreeString(NULL, s_scheduled);
        Emq_FreeString(NULL, s_pending);
        Emq_FreeString(NULL, s_zero);
        Emq_FreeString(NULL, f_state);
        Emq_FreeString(NULL, f_attempts);
        Emq_FreeString(NULL, f_payload);
        Emq_FreeString(NULL, f_priority);
        Emq_FreeString(NULL, f_unique);
        Emq_FreeString(NULL, f_unique_until);
        Emq_FreeString(NULL, f_notify);
        s_scheduled = s_pending = s_zero = NULL;
        f_state = f_attempts = f_payload = f_priority = f_unique = f_unique_until = f_notify =
            NULL;
    }
    return EMQ_OK;
}

EMQ_VISIBLE int ValkeyModule_OnLoad(EmqCtx *ctx, EmqStr **argv, int argc) {
    (void)argv, (void)argc;
    return load(ctx);
}

EMQ_VISIBLE int RedisModule_OnLoad(EmqCtx *ctx, EmqStr **argv, int argc) {
    (void)argv, (void)argc;
    return load(ctx);
}

EMQ_VISIBLE int ValkeyModule_OnUnload(EmqCtx *ctx) {
    (void)ctx;
    return unload();
}

EMQ_VISIBLE int RedisModule_OnUnload(EmqCtx *ctx) {
    (void)ctx;
    return unload();
}
