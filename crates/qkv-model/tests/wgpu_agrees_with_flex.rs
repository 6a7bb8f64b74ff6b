//! The same weights give the same logits on the CPU (flex) and on wgpu. On a machine without a
//! GPU, wgpu runs on Mesa's lavapipe (`apt-get install mesa-vulkan-drivers`).

use qkv_model::burn::module::Module;
use qkv_model::burn::tensor::{Device, Int, Tensor, TensorData};
use qkv_model::{AttentionVariant, Gpt, Preset};

fn wgpu_device() -> Device {
    Device::wgpu_options().init().unwrap_or_else(|err| {
        panic!("no wgpu adapter ({err}); on a machine without a GPU install Mesa's lavapipe: apt-get install mesa-vulkan-drivers")
    })
}

#[test]
fn flex_and_wgpu_forwards_agree_for_every_variant() {
    let flex = Device::flex();
    let wgpu = wgpu_device();
    let mut config = Preset::Classroom.config();
    config.vocab_size = 17;
    config.block_size = 12;
    let tokens: Vec<i64> = (0..2 * 12).map(|i| (i * 7 % 17) as i64).collect();
    for variant in AttentionVariant::ALL {
        for kv_heads in [4, 2] {
            let config = config.clone().with_variant(variant).with_kv_heads(kv_heads);
            if config.validate().is_err() {
                continue;
            }
            let model = Gpt::new_seeded(&config, &flex, 5).unwrap();
            let input = |device: &Device| Tensor::<2, Int>::from_data(TensorData::new(tokens.clone(), [2, 12]), device);
            let on_cpu = model.forward(input(&flex)).into_data().try_to_vec::<f32>().unwrap();
            let model = model.to_device(&wgpu);
            let on_gpu = model.forward(input(&wgpu)).into_data().try_to_vec::<f32>().unwrap();
            let diff = on_cpu.iter().zip(&on_gpu).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-4, "{variant} kv_heads {kv_heads}: flex and wgpu differ by {diff}");
            let attention = model.forward_with_attention(input(&wgpu)).attention;
            assert_eq!(attention.len(), config.n_layer);
        }
    }
}
