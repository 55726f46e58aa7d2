/* emq_api.c: the pointer definitions and lookups for the entry points listed in emq_api.h. */
#include "emq_api.h"

#define EMQ_DEFINE(ret, name, args) ret(*Emq_##name) args = NULL;
EMQ_API(EMQ_DEFINE)
#undef EMQ_DEFINE

typedef int (*EmqGetApi)(const char *name, void **out);

static int lookup(EmqGetApi getapi, const char *prefix, const char *name, void **out) {
    char full[96];
    size_t i = 0;
    const char *p;
    for (p = prefix; *p && i < sizeof(full) - 1; p++) full[i++] = *p;
    for (p = name; *p && i < sizeof(full) - 1; p++) full[i++] = *p;
    full[i] = '\0';
    return getapi(full, out);
}

int emq_api_init(EmqCtx *ctx) {
    /* The context's first member is the server's getapi function. */
    EmqGetApi getapi;
    void *probe = NULL;
    const char *prefix = "ValkeyModule_";
    *(void **)&getapi = *(void **)ctx;
    if (getapi == NULL) return EMQ_ERR;
    /* Valkey knows both prefixes, Redis only its own: pick the one the server answers. */
    if (lookup(getapi, prefix, "SetModuleAttribs", &probe) != 0) prefix = "RedisModule_";
#define EMQ_LOOKUP(ret, name, args)                                                      \
    if (lookup(getapi, prefix, #name, (void **)&Emq_##name) != 0 || Emq_##name == NULL) \
        return EMQ_ERR;
    EMQ_API(EMQ_LOOKUP)
#undef EMQ_LOOKUP
    return EMQ_OK;
}
