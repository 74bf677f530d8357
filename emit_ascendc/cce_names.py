"""Global names a kernel function must not take: the CCE builtins the 910B AscendC library calls.

An emitted kernel is an ``extern "C"`` function at global scope, next to the bisheng compiler's
builtin intrinsics (``vadd``, ``set_flag``, ``copy_gm_to_ubuf``, ...), which live in the same
global namespace; a kernel named like one of them redeclares the builtin. These are the
lower-case identifiers called (as ``name(``) in mirror-cann/asc-devkit
``impl/basic_api/dav_c220/*.h`` at commit 82b89a15f, minus C++ keywords and local names, i.e.
the builtins (and the few global helpers) the 910B implementation of the AscendC API uses::

    git --git-dir=<asc-devkit> show HEAD:impl/basic_api/dav_c220/<file>   # for every file
    grep -oE '\\b[a-z][a-z0-9_]*\\s*\\(' ...                              # called names

The list is not every builtin the compiler knows (those are not published as headers), so
``c_syntax.c_name`` also keeps names clear of C++ keywords.
"""

from __future__ import annotations

CCE_BUILTINS: frozenset[str] = frozenset("""
asc_capture_time_stamp_cycle asc_dump_cbuf asc_dump_gm asc_dump_l1buf asc_dump_shape_impl
asc_dump_ubuf asc_time_stamp_impl begin_pipe clz copy_cbuf_to_bt copy_cbuf_to_fbuf
copy_cbuf_to_gm copy_gm_to_cbuf copy_gm_to_cbuf_multi_nd2nz_b16 copy_gm_to_cbuf_multi_nd2nz_b32s
copy_gm_to_cbuf_multi_nd2nz_b8 copy_gm_to_ubuf copy_gm_to_ubuf_align_b16
copy_gm_to_ubuf_align_b32 copy_gm_to_ubuf_align_b8 copy_matrix_cbuf_to_cc copy_matrix_cc_to_cbuf
copy_matrix_cc_to_gm copy_ubuf_to_gm copy_ubuf_to_gm_align_b16 copy_ubuf_to_gm_align_b32
copy_ubuf_to_gm_align_b8 copy_ubuf_to_ubuf create_ca_matrix create_ca_matrix_bf16
create_cb_matrix create_cb_matrix_bf16 create_cbuf_matrix create_cbuf_matrix_bf16 dc_preload
dcci fake_overflow_status_1 fb0 ffts_cross_core_sync get_acc_val get_arch_ver get_block_idx
get_cmpmask get_condition_flag get_coreid get_ctrl get_ffts_base_addr get_fpc get_icache_prl_st
get_imm get_l2_in_main get_l2_vaddr_base get_lpcnt get_max_min_cnt get_overflow_status
get_para_base get_pc get_rsvd_cnt get_st_atomic_cfg get_stack_phy_base get_status
get_subblockdim get_subblockid get_thread_dim get_thread_id get_vms4_sr hset_flag hwait_flag
img2colv2_cbuf_to_ca img2colv2_cbuf_to_ca_s4 img2colv2_cbuf_to_cb img2colv2_cbuf_to_ub ld_dev
load_cbuf_to_ca load_cbuf_to_ca_s4 load_cbuf_to_ca_transpose load_cbuf_to_cb load_cbuf_to_cb_s4
load_cbuf_to_cb_sp load_cbuf_to_cb_transpose load_cbuf_to_cb_transpose_s4 load_gm_to_ca
load_gm_to_cb load_gm_to_cbuf load_image_to_cbuf mad mad_s4 mad_sp pipe_barrier preload sbitset0
scatter_vnchwconv_b16 scatter_vnchwconv_b32 scatter_vnchwconv_b8 set_aipp_spr_0 set_aipp_spr_1
set_aipp_spr_10 set_aipp_spr_11 set_aipp_spr_12 set_aipp_spr_13 set_aipp_spr_14 set_aipp_spr_15
set_aipp_spr_16 set_aipp_spr_17 set_aipp_spr_18 set_aipp_spr_19 set_aipp_spr_2 set_aipp_spr_20
set_aipp_spr_21 set_aipp_spr_22 set_aipp_spr_23 set_aipp_spr_24 set_aipp_spr_3 set_aipp_spr_4
set_aipp_spr_5 set_aipp_spr_6 set_aipp_spr_7 set_aipp_spr_8 set_aipp_spr_9 set_atomic_add
set_atomic_bf16 set_atomic_f16 set_atomic_f32 set_atomic_max set_atomic_min set_atomic_none
set_atomic_s16 set_atomic_s32 set_atomic_s8 set_cmpmask set_condition_flag set_ctrl
set_data_exp_0 set_data_exp_1 set_data_exp_2 set_data_exp_3 set_deqscale set_ffts_base_addr
set_flag set_fmatrix set_fmatrix_b set_fpc set_l0_set_value_bf16 set_l0_set_value_h set_l0a_2d
set_l0b_2d set_l1_2d set_l1_3d_size set_l3d_rpt set_lpcnt set_lrelu_alpha set_mask_count
set_mask_norm set_mov_pad_val set_nd_para set_padding set_pcie_rd_ctrl set_quant_pre
set_st_atomic_cfg set_va_reg_sb set_vector_mask sff0 st_dev trap vabs vadd vaddrelu
vaddreluconv_f162s8 vaddreluconv_f322f16 vaddreluconv_s162s8 vaddreluconv_vdeqs162b8 vadds vand
vaxpy vbitsort vbrcb vcadd vcgadd vcgmax vcgmin vcmax vcmin vcmp_eq vcmp_ge vcmp_gt vcmp_le
vcmp_lt vcmp_ne vcmpv_eq vcmpv_ge vcmpv_gt vcmpv_le vcmpv_lt vcmpv_ne vcmpvs_eq vcmpvs_ge
vcmpvs_gt vcmpvs_le vcmpvs_lt vcmpvs_ne vconv_bf162f32 vconv_bf162s32a vconv_bf162s32c
vconv_bf162s32f vconv_bf162s32r vconv_bf162s32z vconv_deq vconv_deqs162b8h vconv_deqs162b8l
vconv_f162f32 vconv_f162s16a vconv_f162s16c vconv_f162s16f vconv_f162s16r vconv_f162s16z
vconv_f162s32a vconv_f162s32c vconv_f162s32f vconv_f162s32r vconv_f162s32z vconv_f162s4
vconv_f162s4a vconv_f162s4c vconv_f162s4f vconv_f162s4r vconv_f162s4z vconv_f162s8 vconv_f162s8a
vconv_f162s8c vconv_f162s8f vconv_f162s8r vconv_f162s8z vconv_f162u8 vconv_f162u8a vconv_f162u8c
vconv_f162u8f vconv_f162u8r vconv_f162u8z vconv_f322bf16a vconv_f322bf16c vconv_f322bf16f
vconv_f322bf16r vconv_f322bf16z vconv_f322f16 vconv_f322f16a vconv_f322f16c vconv_f322f16f
vconv_f322f16o vconv_f322f16r vconv_f322f16z vconv_f322f32a vconv_f322f32c vconv_f322f32f
vconv_f322f32r vconv_f322f32z vconv_f322s16a vconv_f322s16c vconv_f322s16f vconv_f322s16r
vconv_f322s16z vconv_f322s32a vconv_f322s32c vconv_f322s32f vconv_f322s32r vconv_f322s32z
vconv_f322s64a vconv_f322s64c vconv_f322s64f vconv_f322s64r vconv_f322s64z vconv_s162f16
vconv_s162f16a vconv_s162f16c vconv_s162f16f vconv_s162f16r vconv_s162f16z vconv_s162f32
vconv_s322f32 vconv_s322f32a vconv_s322f32c vconv_s322f32f vconv_s322f32r vconv_s322f32z
vconv_s322s16 vconv_s322s64 vconv_s42f16 vconv_s642f32a vconv_s642f32c vconv_s642f32f
vconv_s642f32r vconv_s642f32z vconv_s642s32 vconv_s82f16 vconv_u82f16 vconv_vdeqs162b8h
vconv_vdeqs162b8l vcopy vcpadd vdiv vector_dup vexp vgather vgatherb vld_va_reg vln vlrelu vmadd
vmaddrelu vmax vmaxs vmin vmins vmla vmrgsort4 vmul vmulconv_f162s8 vmulconv_f162u8 vmuls vnot
vor vrec vreducev2 vrelu vrsqrt vsel vshl vshr vsqrt vsub vsubrelu vsubreluconv_f162s8
vsubreluconv_f322f16 vsubreluconv_s162s8 vtranspose wait_flag wait_flag_dev
""".split())

CPP_KEYWORDS: frozenset[str] = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t
class compl const constexpr const_cast continue decltype default delete do double dynamic_cast
else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual
void volatile wchar_t while xor xor_eq
""".split())
