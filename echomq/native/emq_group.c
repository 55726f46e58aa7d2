/* emq_group.c: grouped claims and acks natively, for EMQ.CLAIM, EMQ.ACK and EMQ.ACKMANY.
 *
 * The scripts' ring of ready groups (claim-2.lua's turns between pending and the ring,
 * its from_ring; includes/ring.lua's ring_sync and left_active; includes/window.lua's rate
 * log), with their replies and keyspace effects:
 *
 *   claim    the turn (<base>turn) alternating pending and the ring; the group at the
 *            ring's head gives its lane's first job, its active count rises, a group of
 *            weight w keeps the head w turns (streak), a group still ready goes to the
 *            back (<base>ringseq), one that is not leaves the ring; a group rate is the
 *            sliding log <base>g:<g>:starts(:n): a full window sends the group to
 *            <base>gwait until its oldest start leaves it; a limit (the group's own, else
 *            <base>gdefaults) keeps it off the ring while it is reached. The queue cap
 *            (<base>limit) bounds the claim's count as the script's (live leases).
 *   ack      a grouped job's group: its active count falls (never below 0), and the
 *            group rejoins the ring at the back when that makes it ready (and wakes).
 *
 * Groups whose gwait time has come rejoin the ring first, as the script's reopen (a timed
 * pause that has ended is resumed), even when the claim then takes nothing (a paused
 * queue, a cap reached).
 *
 * Hand-backs, as emq_hot.c's: reading everything first, the claim refuses before any
 * write when a row it would start is not a plain pending one (the script cancels, buries
 * or expires it), or a group's key or field is not what the scripts write (the script's
 * own error comes from it). Clock: SERVER ms (now, read once by the claim, as the
 * script's TIME).
 *
 * The claim plans in memory first (which job each turn starts, what it writes), reading
 * keys only, then writes the plan turn by turn with the script's own commands (through
 * Call "!", so they replicate and notify as themselves); the rows and active go through
 * emq_hot.c's lease_write.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emq.h"

/* -- reads ------------------------------------------------------------------------------ */

/* v as an integer into *out; 1 when v is absent (out left) or an integer, 0 otherwise. */
static int as_int(const EmqStr *v, long long *out) {
    return v == NULL || Emq_StringToLongLong(v, out) == EMQ_OK;
}

/* A string key's value as an integer (absent: *out = 0, *has = 0); 0 when it is another
 * type or no integer. */
static int string_int(EmqCtx *ctx, EmqStr *key, long long *out, int *has) {
    EmqReply *r;
    int t = type_of(ctx, key), ok = 0;
    char buf[32], *end;
    size_t len;
    const char *p;
    *out = 0, *has = 0;
    if (t == EMQ_KEYTYPE_EMPTY) return 1;
    if (t != EMQ_KEYTYPE_STRING) return 0;
    r = Emq_Call(ctx, "GET", "s", key);
    if (r && Emq_CallReplyType(r) == EMQ_REPLY_STRING) {
        p = Emq_CallReplyStringPtr(r, &len);
        if (len > 0 && len < sizeof(buf)) {
            memcpy(buf, p, len);
            buf[len] = 0;
            *out = strtoll(buf, &end, 10);
            ok = *end == 0 && (buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9'));
            *has = 1;
        }
    }
    call(r);
    return ok;
}

/* key + suffix (the lane and the log keys from the group's meta key). */
static EmqStr *suffixed(EmqCtx *ctx, Bag *b, EmqStr *key, const char *suffix) {
    size_t len;
    const char *p = Emq_StringPtrLen(key, &len);
    return bag(b, keyat(ctx, p, len, suffix, "", 0));
}

/* The sorted set's member at rank i (score order), NULL past its end. */
static EmqStr *nth(EmqCtx *ctx, Bag *b, EmqStr *key, size_t i) {
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ);
    EmqStr *got = NULL;
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET &&
        Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, HUGE_VAL, 0, 0) == EMQ_OK) {
        while (!Emq_ZsetRangeEndReached(k)) {
            if (i-- == 0) {
                got = bag(b, Emq_ZsetRangeCurrentElement(k, NULL));
                break;
            }
            if (!Emq_ZsetRangeNext(k)) break;
        }
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    return got;
}

static size_t zcard(EmqCtx *ctx, EmqStr *key) {
    EmqKey *k = Emq_OpenKey(ctx, key, EMQ_READ);
    size_t n = k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET ? Emq_ValueLength(k) : 0;
    Emq_CloseKey(k);
    return n;
}

/* -- the queue cap ---------------------------------------------------------------------- */

/* want bounded by the queue cap (<base>limit): the cap less the live leases on active
 * (scored after now: walked, as few as the cap allows), 0 when none is left; -1 when the cap is not an integer string (the
 * script's to answer). */
long long queue_cap(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *active, long long now,
                    long long want) {
    long long cap, live = 0;
    int has;
    EmqKey *k;
    if (!string_int(ctx, derived(ctx, b, basestr, "limit", NULL), &cap, &has)) return -1;
    if (!has) return want;
    k = Emq_OpenKey(ctx, active, EMQ_READ);
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET &&
        Emq_ZsetFirstInScoreRange(k, (double)now, HUGE_VAL, 1, 0) == EMQ_OK) {
        while (!Emq_ZsetRangeEndReached(k)) {
            live++;
            if (!Emq_ZsetRangeNext(k)) break;
        }
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    if (cap - live < want) want = cap - live;
    return want < 0 ? 0 : want;
}

/* -- one group as a claim reads it ------------------------------------------------------- */

typedef struct {
    EmqStr *name, *meta, *lane, *log, *logn;
    long long active, limit, rmax, rms, weight, streak;
    int has_limit, has_rate, has_weight;
    size_t lane_len, popped;
    int windowed;     /* its rate window was read (the trim planned on that turn) */
    long long used;   /* starts in the window, this claim's included */
    EmqStr **old;     /* the buckets the window drops */
    size_t nold;
    long long gone;   /* the starts they held */
    double oldest;    /* the oldest bucket the window keeps (HUGE_VAL: none) */
    int recorded;     /* this claim recorded a start at now */
} Group;

/* One turn of the ring, as the script's from_ring writes it. */
typedef struct {
    size_t g;
    EmqStr *id;           /* the job it started, NULL: none */
    long long active;     /* the group's active count before the start */
    long long streak;     /* its streak before the turn's HINCRBY */
    int trim;             /* the window drops its old buckets here */
    int wait;             /* the group goes on gwait at wait_at */
    double wait_at;
    int streak_up, streak_del;
    int ring;             /* RING_STAY, RING_BACK (at seq), RING_OUT */
    long long seq;
} Turn;

enum { RING_STAY, RING_BACK, RING_OUT };

typedef struct {
    EmqCtx *ctx;
    Bag *b;
    EmqStr *basestr;
    long long now;
    Group *gs;
    size_t ng, gcap;
    Turn *ts;
    size_t nt, tcap;
    EmqStr **back;        /* groups sent to the back this claim, in order */
    size_t nback, bhead, bcap;
    EmqKey *ring;         /* walked once, from the head, while the plan is made */
    EmqStr *front;        /* the ring's next group not yet taken (NULL: walked) */
    size_t ring_len;
    long long seq;
    int seq_read, seq_used;
    EmqStr *gd[3];        /* <base>gdefaults: rate_max, rate_ms, limit */
    int gd_read;
    const char *refusal;
    struct Reopen *ro;    /* the groups whose gwait time has come, in its order */
    size_t nro, rocap;
} Plan;

/* A group reopened by the claim (the script's reopen, before anything else). */
typedef struct Reopen {
    EmqStr *name, *meta;
    int resume;           /* its timed pause is over: HDEL paused, paused_until */
    long long rewait;     /* its pause ends later: back on gwait then (0: not) */
    int ring;             /* RING_BACK: joins the ring at seq; RING_OUT: leaves it */
    long long seq;
} Reopen;

static void *grow(void *v, size_t n, size_t *cap, size_t size) {
    void *w;
    if (n < *cap) return v;
    *cap = *cap ? *cap * 2 : 16;
    w = Emq_Alloc(size * *cap);
    if (n) memcpy(w, v, size * n);
    if (v) Emq_Free(v);
    return w;
}

/* The window of g's rate at now (includes/window.lua's in_window, read only): the buckets
 * at or before now - ms it drops, the starts left, its oldest bucket kept. */
static int read_window(Plan *pl, Group *g) {
    EmqKey *k;
    int t;
    size_t cap = 0;
    long long total = 0;
    EmqStr *v = NULL;
    double cut = (double)(pl->now - g->rms);
    if (!is_type_or_empty(pl->ctx, g->log, EMQ_KEYTYPE_ZSET)) return 0;
    k = Emq_OpenKey(pl->ctx, g->logn, EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    Emq_CloseKey(k);
    if (t != EMQ_KEYTYPE_EMPTY && t != EMQ_KEYTYPE_HASH) return 0;
    g->oldest = HUGE_VAL;
    k = Emq_OpenKey(pl->ctx, g->log, EMQ_READ);
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET &&
        Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, HUGE_VAL, 0, 0) == EMQ_OK) {
        while (!Emq_ZsetRangeEndReached(k)) {
            double score;
            EmqStr *m = bag(pl->b, Emq_ZsetRangeCurrentElement(k, &score));
            if (score > cut) {
                g->oldest = score;
                break;
            }
            g->old = grow(g->old, g->nold, &cap, sizeof(EmqStr *));
            g->old[g->nold++] = m;
            if (!Emq_ZsetRangeNext(k)) break;
        }
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    k = Emq_OpenKey(pl->ctx, g->logn, EMQ_READ);
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_HASH) {
        size_t i;
        for (i = 0; i < g->nold; i++) {
            long long c = 0;
            v = NULL;
            Emq_HashGet(k, EMQ_HASH_NONE, g->old[i], &v, NULL);
            if (!as_int(v, &c)) t = -1;
            if (v) Emq_FreeString(pl->ctx, v);
            g->gone += c;
        }
        v = NULL;
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "total", &v, NULL);
        if (!as_int(v, &total)) t = -1;
        if (v) Emq_FreeString(pl->ctx, v);
    }
    Emq_CloseKey(k);
    g->used = total - g->gone;
    g->windowed = 1;
    return t != -1;
}

/* <base>gdefaults, read once per claim; 0 when it is no hash. */
static int read_defaults(Plan *pl) {
    EmqKey *k;
    int t, i;
    if (pl->gd_read) return 1;
    k = Emq_OpenKey(pl->ctx, derived(pl->ctx, pl->b, pl->basestr, "gdefaults", NULL), EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    if (t == EMQ_KEYTYPE_HASH)
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "rate_max", &pl->gd[0], "rate_ms", &pl->gd[1], "limit",
                    &pl->gd[2], NULL);
    Emq_CloseKey(k);
    for (i = 0; i < 3; i++) bag(pl->b, pl->gd[i]);
    pl->gd_read = 1;
    return t == EMQ_KEYTYPE_HASH || t == EMQ_KEYTYPE_EMPTY;
}

/* ringseq, read once per claim (into pl->seq); 0 when it is no integer. */
static int read_seq(Plan *pl) {
    int has;
    if (pl->seq_read) return 1;
    pl->seq_read = 1;
    return string_int(pl->ctx, derived(pl->ctx, pl->b, pl->basestr, "ringseq", NULL), &pl->seq,
                      &has);
}

/* The group named at the ring's head, read once per claim (NULL: refused). */
static Group *group_at(Plan *pl, EmqStr *name) {
    size_t i;
    Group *g;
    EmqKey *k;
    EmqStr *m[6] = {0};
    int t;
    for (i = 0; i < pl->ng; i++)
        if (str_eq(pl->gs[i].name, name)) return &pl->gs[i];
    pl->gs = grow(pl->gs, pl->ng, &pl->gcap, sizeof(Group));
    g = &pl->gs[pl->ng];
    memset(g, 0, sizeof(*g));
    g->name = name;
    g->meta = derived(pl->ctx, pl->b, pl->basestr, "g:", name);
    g->lane = suffixed(pl->ctx, pl->b, g->meta, ":pending");
    k = Emq_OpenKey(pl->ctx, g->meta, EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    if (t == EMQ_KEYTYPE_HASH)
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "rate_max", &m[0], "rate_ms", &m[1], "active", &m[2],
                    "limit", &m[3], "weight", &m[4], "streak", &m[5], NULL);
    Emq_CloseKey(k);
    for (i = 0; i < 6; i++) bag(pl->b, m[i]);
    if (t != EMQ_KEYTYPE_HASH && t != EMQ_KEYTYPE_EMPTY) return NULL;
    if (!(m[0] && m[3])) { /* the queue's defaults stand in (includes/ring.lua) */
        if (!read_defaults(pl)) return NULL;
        if (!m[0]) m[0] = pl->gd[0], m[1] = pl->gd[1];
        if (!m[3]) m[3] = pl->gd[2];
    }
    g->has_rate = m[0] != NULL, g->has_limit = m[3] != NULL, g->has_weight = m[4] != NULL;
    g->weight = 1;
    if (!as_int(m[0], &g->rmax) || !as_int(m[2], &g->active) || !as_int(m[3], &g->limit) ||
        !as_int(m[4], &g->weight) || !as_int(m[5], &g->streak) ||
        (g->has_rate && (!m[1] || !as_int(m[1], &g->rms))) || g->active > (1LL << 60) ||
        g->streak > (1LL << 60))
        return NULL; /* (counters that HINCRBY could not raise: the script's error) */
    if (!is_type_or_empty(pl->ctx, g->lane, EMQ_KEYTYPE_ZSET)) return NULL;
    g->lane_len = zcard(pl->ctx, g->lane);
    if (g->has_rate) {
        g->log = suffixed(pl->ctx, pl->b, g->meta, ":starts");
        g->logn = suffixed(pl->ctx, pl->b, g->meta, ":starts:n");
    }
    pl->ng++;
    return g;
}

/* -- the ring's order while the plan is made ---------------------------------------------- */

static void ring_take(Plan *pl);

/* Whether the reopen took name out of the ring. */
static int reopened_out(Plan *pl, EmqStr *name) {
    size_t i;
    for (i = 0; i < pl->nro; i++)
        if (pl->ro[i].ring == RING_OUT && str_eq(pl->ro[i].name, name)) return 1;
    return 0;
}

static EmqStr *ring_head(Plan *pl) {
    while (pl->front && reopened_out(pl, pl->front)) ring_take(pl);
    if (pl->front) return pl->front;
    return pl->bhead < pl->nback ? pl->back[pl->bhead] : NULL;
}

static void ring_take(Plan *pl) {
    if (pl->front) {
        pl->front = NULL;
        if (Emq_ZsetRangeNext(pl->ring) && !Emq_ZsetRangeEndReached(pl->ring))
            pl->front = bag(pl->b, Emq_ZsetRangeCurrentElement(pl->ring, NULL));
    } else {
        pl->bhead++;
    }
}

/* from_ring(): one turn, or more while groups give nothing; 1 when a job started, 0 when
 * the ring is empty (or the plan refused: pl->refusal). */
static int from_ring(Plan *pl) {
    while (!pl->refusal) {
        EmqStr *name = ring_head(pl);
        Group *g;
        Turn *t;
        int open, got = 0;
        if (!name) return 0;
        g = group_at(pl, name);
        if (!g) {
            pl->refusal = CLAIM_RING;
            return 0;
        }
        pl->ts = grow(pl->ts, pl->nt, &pl->tcap, sizeof(Turn));
        t = &pl->ts[pl->nt++];
        memset(t, 0, sizeof(*t));
        t->g = (size_t)(g - pl->gs);
        if (g->has_rate && !g->windowed) {
            if (!read_window(pl, g)) {
                pl->refusal = CLAIM_RING;
                return 0;
            }
            t->trim = g->nold > 0;
        }
        open = !g->has_rate || g->used < g->rmax;
        if (open && g->popped < g->lane_len) {
            t->id = nth(pl->ctx, pl->b, g->lane, g->popped++);
            got = t->id != NULL;
            if (got) {
                t->active = g->active++;
                if (g->has_rate) {
                    g->used++, g->recorded = 1;
                    open = g->used < g->rmax;
                }
            }
        }
        if (!open) { /* the window is full: the group waits until its oldest start leaves */
            double oldest = g->recorded && (double)pl->now < g->oldest ? (double)pl->now
                                                                       : g->oldest;
            if (oldest == HUGE_VAL) {
                pl->refusal = CLAIM_RING;
                return 0;
            }
            t->wait = 1, t->wait_at = oldest + (double)g->rms;
        }
        if (open && (!g->has_limit || g->active < g->limit) && g->popped < g->lane_len) {
            t->streak = g->streak;
            if (got && g->weight > 1 && ++g->streak < g->weight) {
                t->streak_up = 1; /* keeps the head: its score is left as it is */
            } else {
                if (got && g->weight > 1) t->streak_up = 1;
                if (g->weight > 1) t->streak_del = 1, g->streak = 0;
                if (!read_seq(pl)) {
                    pl->refusal = CLAIM_RING;
                    return 0;
                }
                t->ring = RING_BACK, t->seq = ++pl->seq, pl->seq_used = 1;
                ring_take(pl);
                pl->back = grow(pl->back, pl->nback, &pl->bcap, sizeof(EmqStr *));
                pl->back[pl->nback++] = name;
            }
        } else {
            if (g->has_weight) t->streak_del = 1, g->streak = 0;
            t->ring = RING_OUT;
            ring_take(pl);
            pl->ring_len--;
        }
        if (got) return 1;
    }
    return 0;
}

/* -- the groups whose wait is over (the script's reopen) ---------------------------------- */

/* Each group on gwait whose time has come (score <= now, in gwait's order): off gwait, a
 * timed pause that has ended resumed (one that ends later: back on gwait then), and its
 * ring place as ring_sync leaves it. Read only; 0 when a key it reads is odd. The ring's
 * changes are the plan's start: the groups that join go to the back, in order. */
static int reopen_read(Plan *pl, EmqStr *ringk) {
    EmqKey *k = Emq_OpenKey(pl->ctx, derived(pl->ctx, pl->b, pl->basestr, "gwait", NULL),
                            EMQ_READ);
    EmqStr **due = NULL;
    size_t ndue = 0, dcap = 0, i;
    int ok = 1;
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_ZSET &&
        Emq_ZsetFirstInScoreRange(k, -HUGE_VAL, (double)pl->now, 0, 0) == EMQ_OK) {
        while (!Emq_ZsetRangeEndReached(k)) {
            due = grow(due, ndue, &dcap, sizeof(EmqStr *));
            due[ndue++] = bag(pl->b, Emq_ZsetRangeCurrentElement(k, NULL));
            if (!Emq_ZsetRangeNext(k)) break;
        }
        Emq_ZsetRangeStop(k);
    }
    Emq_CloseKey(k);
    for (i = 0; i < ndue && ok; i++) {
        Reopen *r;
        EmqStr *m[4] = {0}, *limit;
        long long pu = 0, active = 0, cap = 0;
        int t, paused, ready, in_ring;
        pl->ro = grow(pl->ro, pl->nro, &pl->rocap, sizeof(Reopen));
        r = &pl->ro[pl->nro++];
        memset(r, 0, sizeof(*r));
        r->name = due[i];
        r->meta = derived(pl->ctx, pl->b, pl->basestr, "g:", due[i]);
        k = Emq_OpenKey(pl->ctx, r->meta, EMQ_READ);
        t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
        if (t == EMQ_KEYTYPE_HASH)
            Emq_HashGet(k, EMQ_HASH_CFIELDS, "paused_until", &m[0], "paused", &m[1], "active",
                        &m[2], "limit", &m[3], NULL);
        Emq_CloseKey(k);
        bag(pl->b, m[0]), bag(pl->b, m[1]), bag(pl->b, m[2]), bag(pl->b, m[3]);
        limit = m[3];
        if (!limit) ok = ok && read_defaults(pl), limit = pl->gd[2];
        ok = ok && (t == EMQ_KEYTYPE_HASH || t == EMQ_KEYTYPE_EMPTY) && as_int(m[0], &pu) &&
             as_int(m[2], &active) && as_int(limit, &cap) &&
             is_type_or_empty(pl->ctx, suffixed(pl->ctx, pl->b, r->meta, ":pending"),
                              EMQ_KEYTYPE_ZSET);
        r->resume = m[0] && pu <= pl->now;
        r->rewait = m[0] && pu > pl->now ? pu : 0;
        paused = m[1] && !r->resume;
        in_ring = zset_has(pl->ctx, ringk, r->name);
        ready = zcard(pl->ctx, suffixed(pl->ctx, pl->b, r->meta, ":pending")) > 0 && !paused &&
                !(limit && active >= cap) && !r->rewait;
        if (ready && !in_ring) {
            ok = ok && read_seq(pl);
            r->ring = RING_BACK, r->seq = ++pl->seq;
            pl->back = grow(pl->back, pl->nback, &pl->bcap, sizeof(EmqStr *));
            pl->back[pl->nback++] = r->name;
            pl->ring_len++;
        } else if (!ready && in_ring) {
            r->ring = RING_OUT;
            pl->ring_len--;
        }
    }
    if (due) Emq_Free(due);
    return ok;
}

/* The reopen's writes, with the script's commands in its order. */
static void reopen_write(Plan *pl, EmqStr *ringk) {
    EmqCtx *ctx = pl->ctx;
    EmqStr *gwait = derived(ctx, pl->b, pl->basestr, "gwait", NULL);
    size_t i;
    for (i = 0; i < pl->nro; i++) {
        Reopen *r = &pl->ro[i];
        call(Emq_Call(ctx, "ZREM", "!ss", gwait, r->name));
        if (r->resume) call(Emq_Call(ctx, "HDEL", "!scc", r->meta, "paused", "paused_until"));
        if (r->rewait) call(Emq_Call(ctx, "ZADD", "!sls", gwait, r->rewait, r->name));
        if (r->ring == RING_BACK) {
            call(Emq_Call(ctx, "INCR", "!s", derived(ctx, pl->b, pl->basestr, "ringseq", NULL)));
            call(Emq_Call(ctx, "ZADD", "!sls", ringk, r->seq, r->name));
            wake(ctx, derived(ctx, pl->b, pl->basestr, "wake", NULL));
        } else if (r->ring == RING_OUT) {
            call(Emq_Call(ctx, "ZREM", "!ss", ringk, r->name));
        }
    }
}

/* -- the claim ------------------------------------------------------------------------------ */

/* One planned turn of the ring written, with the script's commands in its order. */
static void write_turn(Plan *pl, Turn *t) {
    EmqCtx *ctx = pl->ctx;
    Group *g = &pl->gs[t->g];
    EmqStr *gwait, *ring;
    if (t->trim) {
        call(Emq_Call(ctx, "ZREMRANGEBYSCORE", "!scl", g->log, "-inf", pl->now - g->rms));
        call(Emq_Call(ctx, "HDEL", "!sv", g->logn, g->old, g->nold));
        call(Emq_Call(ctx, "HINCRBY", "!scl", g->logn, "total", -g->gone));
    }
    if (t->id) { /* the lane's first (ZPOPMIN), the group's active count up (HINCRBY) */
        EmqKey *k = Emq_OpenKey(ctx, g->lane, EMQ_READ | EMQ_WRITE);
        int deleted, emptied;
        Emq_ZsetRem(k, t->id, &deleted);
        emptied = Emq_KeyType(k) == EMQ_KEYTYPE_EMPTY;
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_ZSET, "zpopmin", g->lane);
        if (emptied) notify(ctx, EMQ_NOTIFY_GENERIC, "del", g->lane);
        Emq_Replicate(ctx, "ZREM", "ss", g->lane, t->id);
        bump(ctx, g->meta, "active", t->active, 1);
        if (g->has_rate) {
            call(Emq_Call(ctx, "ZADD", "!sll", g->log, pl->now, pl->now));
            call(Emq_Call(ctx, "HINCRBY", "!sll", g->logn, pl->now, 1LL));
            call(Emq_Call(ctx, "HINCRBY", "!scl", g->logn, "total", 1LL));
        }
    }
    if (t->wait) {
        gwait = derived(ctx, pl->b, pl->basestr, "gwait", NULL);
        call(Emq_Call(ctx, "ZADD", "!sls", gwait, (long long)t->wait_at, g->name));
    }
    if (t->streak_up) bump(ctx, g->meta, "streak", t->streak, 1);
    if (t->streak_del) call(Emq_Call(ctx, "HDEL", "!sc", g->meta, "streak"));
    if (t->ring == RING_STAY) return;
    ring = derived(ctx, pl->b, pl->basestr, "ring", NULL);
    if (t->ring == RING_BACK) { /* to the back: ZADD ring <seq> <group> */
        EmqKey *k = Emq_OpenKey(ctx, ring, EMQ_READ | EMQ_WRITE);
        EmqStr *seq = num_str(ctx, t->seq);
        int flags = 0;
        Emq_ZsetAdd(k, (double)t->seq, g->name, &flags);
        Emq_CloseKey(k);
        notify(ctx, EMQ_NOTIFY_ZSET, "zadd", ring);
        Emq_Replicate(ctx, "ZADD", "sss", ring, seq, g->name);
        Emq_FreeString(ctx, seq);
    } else {
        call(Emq_Call(ctx, "ZREM", "!ss", ring, g->name));
    }
}

static void plan_free(Plan *pl) {
    size_t i;
    for (i = 0; i < pl->ng; i++)
        if (pl->gs[i].old) Emq_Free(pl->gs[i].old);
    if (pl->gs) Emq_Free(pl->gs);
    if (pl->ts) Emq_Free(pl->ts);
    if (pl->back) Emq_Free(pl->back);
    if (pl->ro) Emq_Free(pl->ro);
}

/* The claim with groups in the ring (claim-2.lua's turns): up to want jobs, alternating
 * pending and the ring from <base>turn; replies the jobs, or the refusal (nothing
 * written); a claim id's first use records what it leased (claim_record). The caller has checked the queue's controls and bounded want by its cap. */
void group_claim(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *pending, EmqStr *active,
                 long long now, long long lease, long long want, EmqStr *claim_key) {
    Plan pl;
    Lease l;
    EmqStr *ringk = derived(ctx, b, basestr, "ring", NULL), *turnk, **flat = NULL, *id;
    size_t nflat = 0, pending_len = zcard(ctx, pending), lcap = 0, fcap = 0;
    int flat_turn = 1, pending_left = 1, ring_left = 1, ringed, t;
    const char *refusal = NULL;
    EmqReply *r;

    memset(&pl, 0, sizeof(pl));
    memset(&l, 0, sizeof(l));
    pl.ctx = ctx, pl.b = b, pl.basestr = basestr, pl.now = now;
    t = type_of(ctx, ringk);
    if (t != EMQ_KEYTYPE_ZSET && t != EMQ_KEYTYPE_EMPTY) {
        lease_reply(ctx, &l, CLAIM_RING);
        return;
    }
    /* the plan: every turn decided on what the keys hold now, nothing written; first the
     * groups whose wait is over, as the script's reopen (even when nothing is claimed) */
    pl.ring = Emq_OpenKey(ctx, ringk, EMQ_READ);
    pl.ring_len = t == EMQ_KEYTYPE_ZSET ? Emq_ValueLength(pl.ring) : 0;
    if (!reopen_read(&pl, ringk)) refusal = CLAIM_RING;
    turnk = derived(ctx, b, basestr, "turn", NULL);
    t = type_of(ctx, turnk);
    ringed = pl.ring_len > 0;
    if (!ringed) { /* no group ready: the script's flat claim, no turn kept */
        ring_left = 0;
    } else if (t == EMQ_KEYTYPE_STRING) { /* the ring's turn when the last claim left: 'g' */
        size_t len;
        r = Emq_Call(ctx, "GET", "s", turnk);
        if (r && Emq_CallReplyType(r) == EMQ_REPLY_STRING)
            flat_turn = !(Emq_CallReplyStringPtr(r, &len)[0] == 'g' && len == 1);
        call(r);
    } else if (t != EMQ_KEYTYPE_EMPTY) {
        refusal = CLAIM_RING;
    }
    if (refusal || want == 0) {
        if (pl.ring) Emq_CloseKey(pl.ring);
        if (!refusal) reopen_write(&pl, ringk);
        if (!refusal) Emq_ReplyWithArray(ctx, 0);
        else lease_reply(ctx, &l, refusal);
        plan_free(&pl);
        return;
    }
    if (pl.ring && Emq_ZsetFirstInScoreRange(pl.ring, -HUGE_VAL, HUGE_VAL, 0, 0) == EMQ_OK &&
        !Emq_ZsetRangeEndReached(pl.ring))
        pl.front = bag(b, Emq_ZsetRangeCurrentElement(pl.ring, NULL));
    while ((long long)l.n < want && (pending_left || ring_left) && !pl.refusal) {
        id = NULL;
        if ((flat_turn && pending_left) || !ring_left) {
            if (nflat < pending_len) id = nth(ctx, b, pending, nflat);
            if (id) {
                flat = grow(flat, nflat, &fcap, sizeof(EmqStr *));
                flat[nflat++] = id;
            } else {
                pending_left = 0;
            }
        } else if (from_ring(&pl)) {
            id = pl.ts[pl.nt - 1].id;
        } else {
            ring_left = 0;
        }
        if (id) {
            l.ids = grow(l.ids, l.n, &lcap, sizeof(EmqStr *));
            l.ids[l.n++] = id;
        }
        flat_turn = !flat_turn;
    }
    if (pl.ring) {
        Emq_ZsetRangeStop(pl.ring);
        Emq_CloseKey(pl.ring);
    }
    refusal = pl.refusal;
    if (!refusal && l.n) refusal = lease_read(ctx, b, basestr, &l, now);

    if (!refusal) { /* the writes, as the script's: pops, turns, rows, the turn kept */
        size_t i;
        reopen_write(&pl, ringk);
        if (nflat) zset_pop(ctx, pending, flat, nflat, nflat == pending_len);
        for (i = 0; i < pl.nt; i++) write_turn(&pl, &pl.ts[i]);
        if (l.n) lease_write(ctx, b, active, &l, now + lease);
        if (claim_key) claim_record(ctx, b, claim_key, &l, lease);
        if (pl.seq_used)
            call(Emq_Call(ctx, "SET", "!sl", derived(ctx, b, basestr, "ringseq", NULL), pl.seq));
        if (ringed) call(Emq_Call(ctx, "SET", "!sc", turnk, flat_turn ? "f" : "g"));
        if ((long long)l.n == want && (pending_len > nflat || pl.ring_len > 0))
            wake(ctx, derived(ctx, b, basestr, "wake", NULL));
    }
    lease_reply(ctx, &l, refusal);
    if (flat) Emq_Free(flat);
    plan_free(&pl);
}

/* -- the ack ------------------------------------------------------------------------------ */

/* A grouped job's ack, checked before any write: NULL when every key left_active reads
 * or writes is what the scripts write (else the script's own error comes from it). The
 * queue's keys are checked once per command (*queue_done set then), the group's each time. */
const char *group_check(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *group, int *queue_done) {
    EmqStr *meta = derived(ctx, b, basestr, "g:", group), *v[2] = {0}, *dl = NULL;
    EmqKey *k = Emq_OpenKey(ctx, meta, EMQ_READ);
    int t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY, ok, has;
    long long n;
    if (t == EMQ_KEYTYPE_HASH)
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "active", &v[0], "limit", &v[1], NULL);
    Emq_CloseKey(k);
    bag(b, v[0]), bag(b, v[1]);
    ok = (t == EMQ_KEYTYPE_HASH || t == EMQ_KEYTYPE_EMPTY) && as_int(v[0], &n) &&
         as_int(v[1], &n) &&
         is_type_or_empty(ctx, suffixed(ctx, b, meta, ":pending"), EMQ_KEYTYPE_ZSET);
    if (!ok || *queue_done) return ok ? NULL : ACK_LANE;
    *queue_done = 1;
    k = Emq_OpenKey(ctx, derived(ctx, b, basestr, "gdefaults", NULL), EMQ_READ);
    t = k ? Emq_KeyType(k) : EMQ_KEYTYPE_EMPTY;
    if (t == EMQ_KEYTYPE_HASH) Emq_HashGet(k, EMQ_HASH_CFIELDS, "limit", &dl, NULL);
    Emq_CloseKey(k);
    bag(b, dl);
    ok = ok && (t == EMQ_KEYTYPE_HASH || t == EMQ_KEYTYPE_EMPTY) && as_int(dl, &n);
    ok = ok && is_type_or_empty(ctx, derived(ctx, b, basestr, "ring", NULL), EMQ_KEYTYPE_ZSET) &&
         is_type_or_empty(ctx, derived(ctx, b, basestr, "gwait", NULL), EMQ_KEYTYPE_ZSET) &&
         is_type_or_empty(ctx, derived(ctx, b, basestr, "wake", NULL), EMQ_KEYTYPE_LIST) &&
         string_int(ctx, derived(ctx, b, basestr, "ringseq", NULL), &n, &has);
    return ok ? NULL : ACK_LANE;
}

/* left_active for a grouped job's ack: its group's active count one lower (never below
 * 0), and the group back on the ring (at the back, with a wake token) when that made it
 * ready (includes/ring.lua's ring_sync). */
void group_left(EmqCtx *ctx, Bag *b, EmqStr *basestr, EmqStr *group) {
    EmqStr *meta = derived(ctx, b, basestr, "g:", group), *v[3] = {0}, *dl = NULL, *ring, *seqk;
    EmqKey *k = Emq_OpenKey(ctx, meta, EMQ_READ);
    long long active = 0, limit = 0, seq;
    int has;
    if (k && Emq_KeyType(k) == EMQ_KEYTYPE_HASH)
        Emq_HashGet(k, EMQ_HASH_CFIELDS, "active", &v[0], "limit", &v[1], "paused", &v[2], NULL);
    Emq_CloseKey(k);
    bag(b, v[0]), bag(b, v[1]), bag(b, v[2]);
    as_int(v[0], &active);
    bump(ctx, meta, "active", active, -1);
    if (--active < 0) {
        call(Emq_Call(ctx, "HSET", "!scc", meta, "active", "0"));
        active = 0;
    }
    /* a group already on the ring stays there (one job fewer active keeps it ready) */
    ring = derived(ctx, b, basestr, "ring", NULL);
    if (zset_has(ctx, ring, group)) return;
    if (zcard(ctx, suffixed(ctx, b, meta, ":pending")) == 0 || v[2]) return;
    if (!v[1]) {
        k = Emq_OpenKey(ctx, derived(ctx, b, basestr, "gdefaults", NULL), EMQ_READ);
        if (k && Emq_KeyType(k) == EMQ_KEYTYPE_HASH)
            Emq_HashGet(k, EMQ_HASH_CFIELDS, "limit", &dl, NULL);
        Emq_CloseKey(k);
        v[1] = bag(b, dl);
    }
    if (v[1] && as_int(v[1], &limit) && active >= limit) return;
    if (zset_has(ctx, derived(ctx, b, basestr, "gwait", NULL), group)) return;
    seqk = derived(ctx, b, basestr, "ringseq", NULL);
    string_int(ctx, seqk, &seq, &has);
    call(Emq_Call(ctx, "INCR", "!s", seqk));
    call(Emq_Call(ctx, "ZADD", "!sls", ring, seq + 1, group));
    wake(ctx, derived(ctx, b, basestr, "wake", NULL));
}
