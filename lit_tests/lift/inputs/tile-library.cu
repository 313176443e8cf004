// A small attention kernel written for these tests in ThunderKittens' vocabulary (the library itself is not
// needed: the thunderkittens profile names everything the kernel uses). One consumer warp group computes a
// 64-row query tile against 64-row kv tiles that one producer warp streams through two stages; the causal
// instance masks the diagonal kv tile by 16x16 base tiles. Its names follow mha_h100.cu where the profile
// spells them (CONSUMER_WARPGROUPS, fwd_attend_ker_tile_dims<D>::qo_height: the work tile's rows).
#include "kittens.cuh"

using namespace kittens;

constexpr int CONSUMER_WARPGROUPS = 1;

template<int D> struct fwd_attend_ker_tile_dims {};
template<> struct fwd_attend_ker_tile_dims<64> {
    constexpr static int qo_height = 64;
    constexpr static int kv_height = 64;
    constexpr static int stages = 2;
};

template<int D> struct tile_globals {
    using tile = st_bf<64, D>;
    using tile_gl = gl<bf16, -1, -1, -1, -1, tile>;
    tile_gl q;
    tile_gl k;
    tile_gl v;
    tile_gl o;
    const int N;
    const int hr;
};

template<int D, bool causal>
__global__ __launch_bounds__(2 * WARPGROUP_WARPS * kittens::WARP_THREADS, 1)
void attend(const __grid_constant__ tile_globals<D> g) {
    extern __shared__ int __shm[];
    tma_swizzle_allocator al((int*)&__shm[0]);
    using K = fwd_attend_ker_tile_dims<D>;
    using q_tile = st_bf<K::qo_height, D>;
    using kv_tile = st_bf<K::kv_height, D>;
    q_tile  (&q_smem)[CONSUMER_WARPGROUPS] = al.allocate<q_tile, CONSUMER_WARPGROUPS>();
    kv_tile (&k_smem)[K::stages] = al.allocate<kv_tile, K::stages>();
    kv_tile (&v_smem)[K::stages] = al.allocate<kv_tile, K::stages>();
    int warpgroup = kittens::warpid() / kittens::WARPGROUP_WARPS;
    int kv_head = blockIdx.y / g.hr;
    int last = causal ? blockIdx.x : g.N / K::kv_height - 1;

    __shared__ kittens::semaphore q_ready, k_ready[K::stages], v_ready[K::stages], done[K::stages];
    if (threadIdx.x == 0) {
        init_semaphore(q_ready, 0, 1);
        for (int s = 0; s < K::stages; s++) {
            init_semaphore(k_ready[s], 0, 1);
            init_semaphore(v_ready[s], 0, 1);
            init_semaphore(done[s], CONSUMER_WARPGROUPS, 0);
        }
        tma::expect_bytes(q_ready, sizeof(q_tile));
        coord<q_tile> q_at = {blockIdx.z, blockIdx.y, blockIdx.x, 0};
        tma::load_async(q_smem[0], g.q, q_at, q_ready);
    }
    __syncthreads();

    if (warpgroup == CONSUMER_WARPGROUPS) {
        warpgroup::decrease_registers<40>();
        if (kittens::warpid() == CONSUMER_WARPGROUPS * WARPGROUP_WARPS) {
            for (int t = 0; t <= last; t++) {
                if (t >= K::stages) wait(done[t % K::stages], (t / K::stages - 1) % 2);
                coord<kv_tile> at = {blockIdx.z, kv_head, t, 0};
                warp::tma::expect_bytes(k_ready[t % K::stages], sizeof(kv_tile));
                warp::tma::load_async(k_smem[t % K::stages], g.k, at, k_ready[t % K::stages]);
                warp::tma::expect_bytes(v_ready[t % K::stages], sizeof(kv_tile));
                warp::tma::load_async(v_smem[t % K::stages], g.v, at, v_ready[t % K::stages]);
            }
        }
    }
    else {
        warpgroup::increase_registers<232>();
        rt_fl<16, K::kv_height> s;
        rt_bf<16, K::kv_height> p;
        rt_fl<16, D> o;
        col_vec<rt_fl<16, K::kv_height>> m, l, m_old;
        warp::neg_infty(m);
        warp::zero(l);
        warp::zero(o);
        wait(q_ready, 0);
        for (int t = 0; t <= last; t++) {
            wait(k_ready[t % K::stages], (t / K::stages) % 2);
            warpgroup::mm_ABt(s, q_smem[0], k_smem[t % K::stages]);
            warpgroup::mma_async_wait();
            warp::mul(s, s, 0.125f);
            if constexpr (causal) {
                const int q_blk = blockIdx.x * 4 + kittens::warpid();
                int k_blk = t * 4;
                for (; k_blk == last * 4; k_blk += 1000) {
                    for (int j = 0; j < 4; j++) {
                        auto &sub = reinterpret_cast<rt_fl<16, 16>&>(s.tiles[0][j]);
                        if (k_blk + j > q_blk) { warp::neg_infty(sub); }
                        else if (k_blk + j == q_blk) {
                            warp::make_causal(sub, sub, kittens::base_types::constants<float>::neg_infty());
                        }
                        __syncwarp();
                    }
                }
            }
            warp::copy(m_old, m);
            warp::row_max(m, s, m);
            warp::sub_row(s, s, m);
            warp::exp(s, s);
            warp::sub(m_old, m_old, m);
            warp::exp(m_old, m_old);
            warp::mul(l, l, m_old);
            warp::row_sum(l, s, l);
            warp::mul_row(o, o, m_old);
            warp::copy(p, s);
            wait(v_ready[t % K::stages], (t / K::stages) % 2);
            warpgroup::mma_AB(o, p, v_smem[t % K::stages]);
            warpgroup::mma_async_wait();
            if (warpgroup::laneid() == 0) arrive(done[t % K::stages], 1);
        }
        warp::div_row(o, o, l);
        warpgroup::store(q_smem[0], o);
        warpgroup::sync(1);
        if (kittens::warpid() % 4 == 0) {
            coord<q_tile> o_at = {blockIdx.z, blockIdx.y, blockIdx.x, 0};
            warp::tma::store_async(g.o, q_smem[0], o_at);
        }
        warp::tma::store_async_wait();
    }
}

void launch(const tile_globals<64> &g, dim3 grid, int bytes, cudaStream_t stream, bool causal) {
    if (causal) attend<64, true><<<grid, 256, bytes, stream>>>(g);
    else attend<64, false><<<grid, 256, bytes, stream>>>(g);
}
