/* cvars lists every MPI_T control variable of the MPI library it is linked
 * with, one per line: NAME<TAB>TYPE<TAB>VALUE, after a "# version" and a
 * "# cvars N" line. It calls MPI_T_init_thread only (not MPI_Init), so it
 * runs without a launcher and reads the variables exactly as the library
 * initialised them from the environment. A variable bound to an MPI object,
 * or one it cannot read, has an empty value. Exit 2: MPI_T refused to start
 * (MPICH does so for a CVAR value it cannot parse), with its message. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(MPI_Datatype t) {
    if (t == MPI_INT) return "int";
    if (t == MPI_UNSIGNED) return "unsigned";
    if (t == MPI_UNSIGNED_LONG) return "unsigned_long";
    if (t == MPI_UNSIGNED_LONG_LONG) return "unsigned_long_long";
    if (t == MPI_COUNT) return "count";
    if (t == MPI_CHAR) return "char";
    if (t == MPI_DOUBLE) return "double";
    return "other";
}

int main(void) {
    int provided, n, err, len;
    char version[MPI_MAX_LIBRARY_VERSION_STRING], msg[MPI_MAX_ERROR_STRING];
    if (MPI_Get_library_version(version, &len) == MPI_SUCCESS) {
        version[strcspn(version, "\n")] = 0;
        printf("# version %s\n", version);
    }
    if ((err = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided)) != MPI_SUCCESS) {
        msg[0] = 0;
        MPI_Error_string(err, msg, &len);
        fprintf(stderr, "cvars: MPI_T_init_thread failed: %d %s\n", err, msg);
        return 2;
    }
    if ((err = MPI_T_cvar_get_num(&n)) != MPI_SUCCESS) {
        fprintf(stderr, "cvars: MPI_T_cvar_get_num failed: %d\n", err);
        return 2;
    }
    printf("# cvars %d\n", n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[8];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope, count;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        MPI_T_cvar_handle h;
        desc[0] = 0;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) != MPI_SUCCESS)
            continue;
        if (bind != MPI_T_BIND_NO_OBJECT) { /* needs an MPI object: not readable before MPI_Init */
            printf("%s\t%s\t\n", name, type_name(type));
            continue;
        }
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) {
            printf("%s\t%s\t\n", name, type_name(type));
            continue;
        }
        printf("%s\t%s\t", name, type_name(type));
        if (type == MPI_CHAR) {
            char *buf = calloc((size_t)count + 1, 1);
            if (buf && MPI_T_cvar_read(h, buf) == MPI_SUCCESS) {
                for (char *c = buf; *c; c++) if (*c == '\t' || *c == '\n') *c = ' ';
                fputs(buf, stdout);
            }
            free(buf);
        } else if (count >= 1 && count <= 64) {
            long long ll[64];
            double d[64];
            int iv[64];
            unsigned uv[64];
            unsigned long ul[64];
            int ok = 0;
            if (type == MPI_INT) ok = MPI_T_cvar_read(h, iv) == MPI_SUCCESS;
            else if (type == MPI_UNSIGNED) ok = MPI_T_cvar_read(h, uv) == MPI_SUCCESS;
            else if (type == MPI_UNSIGNED_LONG) ok = MPI_T_cvar_read(h, ul) == MPI_SUCCESS;
            else if (type == MPI_UNSIGNED_LONG_LONG || type == MPI_COUNT) ok = MPI_T_cvar_read(h, ll) == MPI_SUCCESS;
            else if (type == MPI_DOUBLE) ok = MPI_T_cvar_read(h, d) == MPI_SUCCESS;
            for (int k = 0; ok && k < count; k++) {
                if (k) putchar(',');
                if (type == MPI_INT) printf("%d", iv[k]);
                else if (type == MPI_UNSIGNED) printf("%u", uv[k]);
                else if (type == MPI_UNSIGNED_LONG) printf("%lu", ul[k]);
                else if (type == MPI_DOUBLE) printf("%g", d[k]);
                else printf("%llu", (unsigned long long)ll[k]);
            }
        }
        putchar('\n');
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return 0;
}
