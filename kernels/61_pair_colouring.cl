// Stage 61, the body pairs of the velocity solve (contact-solve.md E15, rigid-step.md) and
// their colouring, each substep after the contacts are recorded. A pair is a body and another it
// has records with: a body of higher index, or every static side at once (STATIC_BODY). Its
// records are those on the lower body's particles (the other body's mirror them: the voxel
// contacts give both sides the same normal, depth, point and share), so the pass that solves
// them (62_pair_solve.cl) changes both bodies itself. Each body lists the pairs it is the lower
// body of in max_pairs slots (pair g = b * max_pairs + p, in order of the other side, the lowest
// max_pairs others if it has more); pair_totals[1] says how full the slots are, and the host grows
// them when it reads that (at the next detection: it does not wait for the colouring). Each pair's records are then
// listed too (pair_records from pair_record_start[g], pair_record_count[g] of them, in the body's
// region of FRICTION_SLOTS per particle), so that a pair's pass reads its own records only, not
// every record of the lower body (most of which belong to its other pairs).
//
// pair_totals: [0] the pairs listed, [1] the most slots a body filled (max_pairs + 1: a body had
// more others than slots), [2] the pairs coloured so far, [3] the colours used (MAX_PAIR_COLOURS + 1:
// more were needed), [4] the rounds that coloured a pair, [5] the overflow's pairs (those the
// rounds left uncoloured or coloured at or past colour_limit), [PAIR_COLOUR_COUNTS + c] the pairs
// of colour c (OVERFLOW_PAIRS, PAIR_COLOUR_COUNTS and MAX_PAIR_COLOURS: defines from the host,
// pair_colouring.py).
#define COLOUR_MASK_WORDS (MAX_PAIR_COLOURS / 32)

// The pair a record of body b belongs to (the other body, or STATIC_BODY for every static side),
// or NOT_A_PAIR: an empty slot, or the higher body's mirror of a lower one's record (the voxel
// contacts give both sides the same normal, depth, point and share). A sleeping partner's record
// is the awake side's, whichever is lower: the sleeper computed none (40_contacts.cl), and holds
// as a static side until it wakes (62_pair_solve.cl)
#define NOT_A_PAIR (-2)
inline int record_pair(int b, int other, __global const float *body_quiet, float4 sleep)
{
    if (other == NO_RECORD || (other >= 0 && other < b && !is_asleep(body_quiet[other], sleep))) return NOT_A_PAIR;
    return (other >= 0) ? other : STATIC_BODY;
}

// Whether pair slot g (slot g % max_pairs of body g / max_pairs) holds a listed pair
inline bool listed_pair_slot(int g, int max_pairs, int body_count, __global const int *pair_count)
{
    int b = g / max_pairs;
    return b < body_count && g - b * max_pairs < pair_count[b];
}

// A pair's records reduced to manifolds of at most MANIFOLD_POINTS points per group of normals
// (core/manifold.py reduce_manifold, Box3D's b3ReduceManifoldPoints)

// Box3D's b3ArbitraryPerp: a fixed vector normal to unit n
inline float3 arbitrary_perpendicular(float3 n)
{
    const float a = 0.67f, b = -0.42f;
    if (fabs(n.x) > 0.5f) return (float3)(a * n.y + b * n.z, -a * n.x, -b * n.x);
    if (fabs(n.y) > 0.5f) return (float3)(a * n.y, -a * n.x + b * n.z, -b * n.y);
    return (float3)(a * n.z, b * n.z, -a * n.x - b * n.y);
}

inline __global float4 *listed_record(__global const int *records, int t, int stride, __global float4 *solve_record)
{
    int slot = records[t];
    int k = slot / stride;
    return solve_record + k * SOLVE_FIELDS * stride + (slot - k * stride);
}

// the first group whose normal is within MANIFOLD_NORMAL_COSINE of n, or -1
inline int manifold_group(float3 n, const float3 *group_normals, int groups)
{
    for (int g = 0; g < groups; ++g)
        if (dot(n, group_normals[g]) >= MANIFOLD_NORMAL_COSINE) return g;
    return -1;
}

inline bool manifold_chosen(int t, const int *chosen, int from, int to)
{
    for (int m = from; m < to; ++m)
        if (chosen[m] == t) return true;
    return false;
}

// whether record t (r) of group g may still be chosen: in the group and not chosen yet
inline bool manifold_open(__global const float4 *r, int t, int g, const float3 *group_normals, int groups,
                          const int *chosen, int from, int to)
{
    return manifold_group(r[0].xyz, group_normals, groups) == g && !manifold_chosen(t, chosen, from, to);
}

// How deep a record gets by the next detection if it keeps closing as fast as at its detection: a
// speculative contact's points are ranked by it (a cube's edge closing at 20 m/s kept points of its
// far side, a face further away, and went 19 cm into the ground)
inline float depth_by_next_detection(__global const float4 *r, int stride)
{
    return r[stride].w + r[4 * stride].z * SPECULATIVE_TIME;
}

// The records listed at records[0, count) cut to their manifolds' points in place, in their order:
// the points kept count fully (share 1), the others' impulses are dropped (not applied, nor
// warm-started at the next detection). Returns how many are kept.
inline int reduce_pair_records(__global int *records, int count, int stride, __global float4 *solve_record,
                               __global float4 *history_impulse_out)
{
    float3 group_normals[MANIFOLD_GROUPS];
    int groups = 0;
    for (int t = 0; t < count && groups < MANIFOLD_GROUPS; ++t) {
        float3 n = listed_record(records, t, stride, solve_record)[0].xyz;
        if (manifold_group(n, group_normals, groups) < 0) group_normals[groups++] = n;
    }
    int chosen[MANIFOLD_GROUPS * MANIFOLD_POINTS];
    int chosen_count = 0;
    for (int g = 0; g < groups; ++g) {
        float3 n = group_normals[g];
        int base = chosen_count;
        // 1: the deepest by the next detection, ties along a fixed tangent (a later one beats it by
        // MANIFOLD_TIE metres), among the points within MANIFOLD_DEPTH_BAND of the deepest
        float deepest = -INFINITY;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (manifold_group(r[0].xyz, group_normals, groups) == g)
                deepest = fmax(deepest, depth_by_next_detection(r, stride));
        }
        float3 search = arbitrary_perpendicular(n);
        int best = -1;
        float best_score = 0.0f;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (manifold_group(r[0].xyz, group_normals, groups) != g) continue;
            float depth = depth_by_next_detection(r, stride);
            if (depth < deepest - MANIFOLD_DEPTH_BAND) continue;
            float score = depth + dot(search, r[stride].xyz);
            if (best < 0 || score > best_score + MANIFOLD_TIE) { best = t; best_score = score; }
        }
        // none: a NaN normal makes a group no record matches (a finite one matches its own record),
        // and record -1 would be read below
        if (best < 0) continue;
        chosen[chosen_count++] = best;
        if (MANIFOLD_POINTS < 2) continue;
        float3 a = listed_record(records, best, stride, solve_record)[stride].xyz;
        // 2: the furthest from it in the plane (and deep)
        best = -1;
        best_score = MANIFOLD_TOLERANCE2;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (!manifold_open(r, t, g, group_normals, groups, chosen, base, chosen_count)) continue;
            float3 d = r[stride].xyz - a;
            d -= dot(d, n) * n;
            float depth = fmax(depth_by_next_detection(r, stride), 0.0f);
            float score = dot(d, d) + 4.0f * depth * depth;
            if (MANIFOLD_PECKING * score > best_score) { best = t; best_score = score; }
        }
        if (best < 0) continue;
        chosen[chosen_count++] = best;
        if (MANIFOLD_POINTS < 3) continue;
        float3 b = listed_record(records, best, stride, solve_record)[stride].xyz;
        float3 ba = b - a;
        // 3: the largest triangle with those two
        best = -1;
        best_score = MANIFOLD_TOLERANCE2;
        float best_area = 0.0f;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (!manifold_open(r, t, g, group_normals, groups, chosen, base, chosen_count)) continue;
            float area = dot(n, cross(ba, r[stride].xyz - a));
            if (MANIFOLD_PECKING * fabs(area) > best_score) { best = t; best_score = fabs(area); best_area = area; }
        }
        if (best < 0) continue;
        chosen[chosen_count++] = best;
        if (MANIFOLD_POINTS < 4) continue;
        float3 c = listed_record(records, best, stride, solve_record)[stride].xyz;
        float sign = (best_area < 0.0f) ? -1.0f : 1.0f;
        // 4: the most area added outside the triangle
        best = -1;
        best_score = MANIFOLD_TOLERANCE2;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (!manifold_open(r, t, g, group_normals, groups, chosen, base, chosen_count)) continue;
            float3 p = r[stride].xyz;
            float score = fmax(sign * dot(n, cross(p - a, ba)),
                               fmax(sign * dot(n, cross(p - b, c - b)), sign * dot(n, cross(p - c, a - c))));
            if (MANIFOLD_PECKING * score > best_score) { best = t; best_score = score; }
        }
        if (best >= 0) chosen[chosen_count++] = best;
    }
    int kept = 0;
    for (int t = 0; t < count; ++t) {
        int slot = records[t];
        __global float4 *r = listed_record(records, t, stride, solve_record);
        if (manifold_group(r[0].xyz, group_normals, groups) < 0 || manifold_chosen(t, chosen, 0, chosen_count)) {
            r[2 * stride].w = 1.0f;
            records[kept++] = slot;
        } else {
            r[3 * stride] = (float4)(0.0f);
            history_impulse_out[slot] = (float4)(0.0f);
        }
    }
    return kept;
}

__kernel void list_solve_pairs(
    const int body_count,
    const int history_stride,
    const int max_pairs,
    const float4 sleep,
    __global const int *body_first_particle,
    __global const int *body_particle_count,
    __global const uchar *solve_count,
    __global float4 *solve_record,
    __global float4 *history_impulse_out,
    __global const int *history_key_out,
    __global const float *body_quiet,
    __global float *body_quiet_snapshot,  // written: body_quiet as listed (63_islands.cl reads it)
    __global int *pair_other,
    __global int *pair_count,
    __global int *pair_record_start,
    __global int *pair_record_count,
    __global int *pair_records,
    __global int *pair_colour,
    __global uint *pair_bid,
    __global uint *body_colours,
    __global int *body_impact,        // cleared by the host before this kernel
    __global int *pair_totals)
{
    int b = get_global_id(0);
    if (b >= body_count) return;
    body_quiet_snapshot[b] = body_quiet[b];
    for (int w = 0; w < COLOUR_MASK_WORDS; ++w) body_colours[b * COLOUR_MASK_WORDS + w] = 0u;
    __global int *other_of = pair_other + b * max_pairs;
    __global int *records_of = pair_record_count + b * max_pairs;
    int listed = 0, unlisted = 0;
    int first = body_first_particle[b], end = first + body_particle_count[b];
    if (!is_asleep(body_quiet[b], sleep)) {
        for (int i = first; i < end; ++i) {
            for (int k = 0; k < solve_count[i]; ++k) {
                __global const float4 *r = solve_record + k * SOLVE_FIELDS * history_stride + i;
                int other = as_int(r[0].w);
                // an impact (one the solve gives restitution, from half IMPACT_SPEED) on either body
                // (a voxel pair's record is on the lower body's side only, 40_contacts.cl)
                if (other != NO_RECORD && r[4 * history_stride].z > 0.5f * IMPACT_SPEED) {
                    atomic_or(body_impact + b, 1);
                    if (other >= 0) atomic_or(body_impact + other, 1);
                }
                int key = record_pair(b, other, body_quiet, sleep);
                if (key == NOT_A_PAIR) continue;
                // kept in order of the other side (static first), not of the records' slots (which
                // follow the neighbour lists' order), so every device lists the same pairs
                int at = 0;
                while (at < listed && other_of[at] < key) ++at;
                if (at == listed || other_of[at] != key) {
                    // full: the lowest max_pairs others are kept (pair_colouring.list_pairs), so
                    // a new one past them is dropped, and one before them drops the last
                    if (listed == max_pairs) {
                        ++unlisted;
                        if (at == listed) continue;
                        --listed;
                    }
                    for (int p = listed; p > at; --p) {
                        other_of[p] = other_of[p - 1];
                        records_of[p] = records_of[p - 1];
                    }
                    ++listed;
                    other_of[at] = key;
                    records_of[at] = 0;
                }
                records_of[at] += 1;
            }
        }
    }
    pair_count[b] = listed;
    for (int p = 0; p < listed; ++p) pair_colour[b * max_pairs + p] = -1;
    pair_bid[b] = 0u;
    if (listed) atomic_add(pair_totals, listed);
    // the host grows the slots of every body once a body fills its own (a body with more others
    // than slots has its highest ones unsolved until then)
    atomic_max(pair_totals + 1, unlisted ? max_pairs + 1 : listed);
    // each pair's records in the order of the pass above (particle, then slot; with manifolds,
    // particle, then friction key), the pairs one after
    // another from the start of the body's region; the counts count them again as they go
    __global int *start_of = pair_record_start + b * max_pairs;
    int next_start = first * FRICTION_SLOTS;
    for (int p = 0; p < listed; ++p) {
        start_of[p] = next_start;
        next_start += records_of[p];
        records_of[p] = 0;
    }
    for (int i = first; i < end && listed; ++i) {
        int count = solve_count[i];
        int slot_order[FRICTION_SLOTS];
        for (int k = 0; k < count; ++k) slot_order[k] = k;
        // a particle's records by their friction key, not their slot: the slots follow the
        // neighbour lists' order, which differs between devices and the reference, and a manifold
        // (its groups' leading normals, its points' pecking order, the sequential order) depends
        // on the order its records are visited in
        for (int k = 1; k < count; ++k) {
            int s = slot_order[k], key_s = history_key_out[s * history_stride + i], at = k;
            while (at > 0 && history_key_out[slot_order[at - 1] * history_stride + i] > key_s) {
                slot_order[at] = slot_order[at - 1];
                --at;
            }
            slot_order[at] = s;
        }
        for (int o = 0; o < count; ++o) {
            int k = slot_order[o];
            int key = record_pair(b, as_int(solve_record[k * SOLVE_FIELDS * history_stride + i].w), body_quiet, sleep);
            if (key == NOT_A_PAIR) continue;
            int at = 0;
            while (at < listed && other_of[at] != key) ++at;
            if (at == listed) continue;  // an other past the slots
            pair_records[start_of[at] + records_of[at]++] = k * history_stride + i;
        }
    }
}

// Each listed pair's records reduced to its manifolds (reduce_pair_records), a work-item per pair
// slot: a body's pairs one after another were the longest chain of loads in list_solve_pairs
__kernel void reduce_pair_manifolds(
    const int body_count,
    const int history_stride,
    const int max_pairs,
    __global const int *pair_count,
    __global const int *pair_record_start,
    __global int *pair_record_count,
    __global int *pair_records,
    __global float4 *solve_record,
    __global float4 *history_impulse_out)
{
    int g = get_global_id(0);
    if (!listed_pair_slot(g, max_pairs, body_count, pair_count)) return;
    pair_record_count[g] = reduce_pair_records(pair_records + pair_record_start[g], pair_record_count[g],
                                               history_stride, solve_record, history_impulse_out);
}

// Jones-Plassmann rounds with a greedy colour: each round, every pair not yet coloured bids its
// priority at its bodies; the pairs that outbid every other at both (no two of them share a body)
// take the smallest colour neither body has a pair of yet (body_colours: a bit per colour). As
// many colours as the busiest bodies need, not one per round (22 rounds coloured the 10k pile). The
// priorities are a bijection of the pair's index, so the colouring is deterministic.
inline uint pair_priority(int g)
{
    return (uint)g * 0x9E3779B1u;
}

// pair_bid holds two rounds' bids (round parity), so a round clears the next one's as it goes.
__kernel void bid_for_colour(
    const int body_count,
    const int max_pairs,
    const int colour_round,
    __global const int *pair_other,
    __global const int *pair_count,
    __global const int *pair_colour,
    __global uint *pair_bid)
{
    int g = get_global_id(0);
    if (!listed_pair_slot(g, max_pairs, body_count, pair_count) || pair_colour[g] >= 0) return;
    int b = g / max_pairs;
    __global uint *bid = pair_bid + (colour_round & 1) * body_count;
    uint priority = pair_priority(g);
    atomic_max(bid + b, priority);
    int c = pair_other[g];
    if (c >= 0) atomic_max(bid + c, priority);
}

__kernel void take_colour(
    const int body_count,
    const int max_pairs,
    const int colour_round,
    __global const int *pair_other,
    __global const int *pair_count,
    __global int *pair_colour,
    __global int *pair_rank,
    __global uint *pair_bid,
    __global uint *body_colours,
    __global int *pair_totals)
{
    int g = get_global_id(0);
    int b = g / max_pairs;
    if (b >= body_count) return;
    if (g % max_pairs == 0) pair_bid[((colour_round + 1) & 1) * body_count + b] = 0u;  // the next round's
    if (g % max_pairs >= pair_count[b] || pair_colour[g] >= 0) return;
    __global const uint *bid = pair_bid + (colour_round & 1) * body_count;
    uint priority = pair_priority(g);
    int c = pair_other[g];
    if (bid[b] != priority || (c >= 0 && bid[c] != priority)) return;
    // no other pair at b or c wins this round: their colour masks are this work-item's to change
    __global uint *colours_b = body_colours + b * COLOUR_MASK_WORDS;
    __global uint *colours_c = body_colours + max(c, 0) * COLOUR_MASK_WORDS;
    int colour = -1;
    for (int w = 0; w < COLOUR_MASK_WORDS && colour < 0; ++w) {
        uint free_ = ~(colours_b[w] | ((c >= 0) ? colours_c[w] : 0u));
        if (free_ == 0u) continue;
        uint lowest = free_ & (~free_ + 1u);
        colour = 32 * w + 31 - (int)clz(lowest);
        colours_b[w] |= lowest;
        if (c >= 0) colours_c[w] |= lowest;
    }
    if (colour < 0) {
        atomic_max(pair_totals + 3, MAX_PAIR_COLOURS + 1);  // the host refuses the scene
        return;
    }
    pair_colour[g] = colour;
    pair_rank[g] = atomic_inc(pair_totals + PAIR_COLOUR_COUNTS + colour);
    atomic_inc(pair_totals + 2);
    atomic_max(pair_totals + 3, colour + 1);
    atomic_max(pair_totals + 4, colour_round + 1);
}

// Where each colour's pairs start in colour_pairs: the colours below colour_limit (the colours the
// host launches) one after another, then the overflow (every other pair listed), whose pairs
// 62_pair_solve.cl solves one after another. One work-item: colour_limit is a few dozen at most.
__kernel void start_colours(
    const int colour_limit,
    __global const int *pair_totals,
    __global int *colour_start)
{
    if (get_global_id(0) != 0) return;
    int start = 0;
    for (int colour = 0; colour < colour_limit; ++colour) {
        colour_start[colour] = start;
        start += pair_totals[PAIR_COLOUR_COUNTS + colour];
    }
    colour_start[colour_limit] = start;
    colour_start[colour_limit + 1] = pair_totals[0];
}

// Each colour's pairs gathered in colour_pairs from colour_start[colour] (the pair's slot g, other
// side, first record and record count), and the overflow's from
// colour_start[colour_limit] (in any order: sort_overflow_pairs orders them).
__kernel void gather_colour_pairs(
    const int body_count,
    const int max_pairs,
    const int colour_limit,
    __global const int *pair_count,
    __global const int *pair_colour,
    __global const int *pair_rank,
    __global const int *colour_start,
    __global const int *pair_other,
    __global const int *pair_record_start,
    __global const int *pair_record_count,
    __global int *pair_totals,
    __global int4 *colour_pairs)
{
    int g = get_global_id(0);
    if (!listed_pair_slot(g, max_pairs, body_count, pair_count)) return;
    int colour = pair_colour[g];
    int4 entry = (int4)(g, pair_other[g], pair_record_start[g], pair_record_count[g]);
    if (colour >= 0 && colour < colour_limit)
        colour_pairs[colour_start[colour] + pair_rank[g]] = entry;
    else
        colour_pairs[colour_start[colour_limit] + atomic_inc(pair_totals + OVERFLOW_PAIRS)] = entry;
}

// The overflow's pairs in slot order, as the reference solves them (they share bodies, so their
// order is the result's): one work-item, an insertion sort (the overflow is empty while the rounds
// and colours the host enqueues suffice, and a few pairs when a detection needs more than the last).
__kernel void sort_overflow_pairs(
    const int colour_limit,
    __global const int *colour_start,
    __global int4 *colour_pairs)
{
    if (get_global_id(0) != 0) return;
    int first = colour_start[colour_limit], end = colour_start[colour_limit + 1];
    for (int t = first + 1; t < end; ++t) {
        int4 entry = colour_pairs[t];
        int at = t;
        while (at > first && colour_pairs[at - 1].x > entry.x) {
            colour_pairs[at] = colour_pairs[at - 1];
            --at;
        }
        colour_pairs[at] = entry;
    }
}
