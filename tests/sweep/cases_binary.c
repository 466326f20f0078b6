/* Sweep cases for elementwise binary ops. */
#include "sweep.h"

const sweep_case sweep_cases_binary[] = {
    {"add", "n:3x4;n:3x4", ""},
    {"add", "n:2x3x4;n:4", ""},
    {"add", "n:3x1;n:1x5", ""},
    {"add", "n:2x0x3;n:3", ""},
    {"add", "n:;n:2x2", ""},
    {"add", "i0_10:5;i0_10:5", ""},
    {"sub", "n:3x4;n:4", ""},
    {"mul", "n:3x4;n:3x1", ""},
    {"mul", "i0_10:2x3;i0_10:3", ""},
    {"div", "n:3x4;p:4", ""},
    {"pow", "p:3x4;n:3x4", ""},
    {"pow", "p:5;n:", ""},
    {"maximum", "d:3x4;d:3x4", ""},
    {"maximum", "n:3x4;n:", ""},
    {"minimum", "d:2x3;d:3", ""},
    {"eq", "i0_3:4x4;i0_3:4", ""},
    {"ne", "i0_3:4x4;i0_3:4x4", ""},
    {"lt", "n:3x4;n:4", ""},
    {"le", "i0_3:6;i0_3:6", ""},
    {"gt", "n:3x4;n:3x4", ""},
    {"ge", "i0_3:6;i0_3:1", ""},
    {"logical_and", "b:3x4;b:4", ""},
    {"logical_or", "b:3x4;b:3x4", ""},
    {"logical_not", "b:3x4", ""},
    {"logical_not", "n:5", ""},
    {"where", "b:3x4;n:3x4;n:4", ""},
    {"where", "b:3x1;n:1x4;n:", ""},
    {0},
};

static bool bad_broadcast(void) {
    int64_t a[2] = {2, 3}, b[2] = {4, 3};
    return oar_add(oar_zeros(a, 2, OAR_F32), oar_zeros(b, 2, OAR_F32)) != NULL;
}
static bool bad_dtype(void) {
    int64_t a[1] = {3};
    return oar_mul(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F64)) != NULL;
}
static bool bad_where_cond(void) {
    int64_t a[1] = {3};
    return oar_where(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32)) != NULL;
}
static bool null_input(void) {
    int64_t a[1] = {3};
    return oar_add(oar_zeros(a, 1, OAR_F32), NULL) != NULL;
}

const sweep_bad sweep_bad_binary[] = {
    {"add of shapes that do not broadcast", bad_broadcast, "expected shapes that broadcast"},
    {"mul of f32 and f64", bad_dtype, "got f32 (input 0) and f64 (input 1)"},
    {"where with a float condition", bad_where_cond, "expected cond to be bool"},
    {"add with a NULL input", null_input, "input 1 is NULL"},
    {0},
};
