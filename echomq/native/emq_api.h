/* emq_api.h: the slice of the Valkey/Redis module API the EMQ module uses, declared here.
 *
 * We do not ship or copy the upstream valkeymodule.h / redismodule.h. At load time the
 * server hands a module its API through the context: the first pointer-sized member of
 * the context passed to OnLoad is the server's lookup function
 *     int getapi(const char *name, void **out)   (0 = found, 1 = unknown)
 * and every entry point is fetched from it by its full name ("ValkeyModule_<Fn>" on
 * Valkey, "RedisModule_<Fn>" on Redis; Valkey answers to both).
 *
 * EMQ_API is an X-macro: one line per entry point (return type, name, argument list).
 * It expands to the extern declarations below, to the pointer definitions and to the
 * lookups in emq_api.c, so a function is named exactly once. All server types are opaque.
 */
#ifndef EMQ_API_H
#define EMQ_API_H

#include <stddef.h>

typedef struct EmqCtx EmqCtx;       /* a command's (or OnLoad's) context */
typedef struct EmqStr EmqStr;       /* a server string object */
typedef struct EmqKey EmqKey;       /* an open key handle */
typedef struct EmqReply EmqReply;   /* a reply to a Call() */
typedef int (*EmqCmdFunc)(EmqCtx *ctx, EmqStr **argv, int argc);

/* Status codes and constants, as the server defines them (checked by behaviour on
 * Valkey 9.1 and Redis 7.0). */
#define EMQ_OK 0
#define EMQ_ERR 1
#define EMQ_APIVER_1 1

#define EMQ_READ 1
#define EMQ_WRITE 2

#define EMQ_KEYTYPE_EMPTY 0
#define EMQ_KEYTYPE_STRING 1
#define EMQ_KEYTYPE_LIST 2
#define EMQ_KEYTYPE_HASH 3
#define EMQ_KEYTYPE_ZSET 5

#define EMQ_ZADD_XX 1

#define EMQ_NOTIFY_GENERIC 4
#define EMQ_NOTIFY_STRING 8
#define EMQ_NOTIFY_HASH 64
#define EMQ_NOTIFY_ZSET 128

#define EMQ_HASH_NONE 0
#define EMQ_HASH_CFIELDS 4 /* field names are C strings */
#define EMQ_HASH_EXISTS 8  /* HashGet: the out-param is an int* (field present?) */

#define EMQ_NO_EXPIRE -1LL /* GetExpire: the key has no TTL */

#define EMQ_REPLY_STRING 0

/* X(return type, name without prefix, (argument types)) */
#define EMQ_API(X)                                                                      \
    X(void, SetModuleAttribs, (EmqCtx *, const char *, int, int))                      \
    X(int, IsModuleNameBusy, (const char *))                                            \
    X(int, CreateCommand, (EmqCtx *, const char *, EmqCmdFunc, const char *, int, int, int)) \
    X(int, WrongArity, (EmqCtx *))                                                      \
    X(int, ReplyWithError, (EmqCtx *, const char *))                                    \
    X(int, ReplyWithLongLong, (EmqCtx *, long long))                                    \
    X(int, ReplyWithString, (EmqCtx *, EmqStr *))                                       \
    X(int, ReplyWithArray, (EmqCtx *, long))                                            \
    X(int, ReplyWithStringBuffer, (EmqCtx *, const char *, size_t))                    \
    X(const char *, StringPtrLen, (const EmqStr *, size_t *))                           \
    X(int, StringToLongLong, (const EmqStr *, long long *))                             \
    X(EmqStr *, CreateString, (EmqCtx *, const char *, size_t))                         \
    X(void, FreeString, (EmqCtx *, EmqStr *))                                           \
    X(void *, Alloc, (size_t))                                                          \
    X(void, Free, (void *))                                                             \
    X(EmqKey *, OpenKey, (EmqCtx *, EmqStr *, int))                                     \
    X(void, CloseKey, (EmqKey *))                                                       \
    X(int, KeyType, (EmqKey *))                                                         \
    X(size_t, ValueLength, (EmqKey *))                                                  \
    X(int, StringSet, (EmqKey *, EmqStr *))                                             \
    X(long long, GetExpire, (EmqKey *))                                                 \
    X(int, SetExpire, (EmqKey *, long long))                                            \
    X(int, DeleteKey, (EmqKey *))                                                       \
    X(int, ZsetAdd, (EmqKey *, double, EmqStr *, int *))                                \
    X(int, ZsetRem, (EmqKey *, EmqStr *, int *))                                        \
    X(int, ZsetScore, (EmqKey *, EmqStr *, double *))                                   \
    X(int, ZsetFirstInScoreRange, (EmqKey *, double, double, int, int))                \
    X(EmqStr *, ZsetRangeCurrentElement, (EmqKey *, double *))                          \
    X(int, ZsetRangeNext, (EmqKey *))                                                   \
    X(int, ZsetRangeEndReached, (EmqKey *))                                             \
    X(void, ZsetRangeStop, (EmqKey *))                                                  \
    X(int, HashGet, (EmqKey *, int, ...))                                               \
    X(int, HashSet, (EmqKey *, int, ...))                                               \
    X(EmqReply *, Call, (EmqCtx *, const char *, const char *, ...))                    \
    X(void, FreeCallReply, (EmqReply *))                                                \
    X(int, CallReplyType, (EmqReply *))                                                 \
    X(const char *, CallReplyStringPtr, (EmqReply *, size_t *))                         \
    X(int, Replicate, (EmqCtx *, const char *, const char *, ...))                      \
    X(int, NotifyKeyspaceEvent, (EmqCtx *, int, const char *, EmqStr *))                \
    X(long long, Milliseconds, (void))

#define EMQ_DECLARE(ret, name, args) extern ret(*Emq_##name) args;
EMQ_API(EMQ_DECLARE)
#undef EMQ_DECLARE

/* Fetch every entry point through the context's lookup function. EMQ_OK, or EMQ_ERR when
 * one is missing (the server is too old for this module). */
int emq_api_init(EmqCtx *ctx);

#endif
