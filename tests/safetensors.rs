//! `.safetensors` from Rust: the bytes follow the format's layout (u64 little-endian header
//! length, JSON header, little-endian data), round trips are bit-exact, and bad input is an
//! error, not a panic.

use ferrograd::{safetensors, ErrorKind, Tensor};

fn sample() -> Vec<(String, Tensor)> {
    vec![
        (
            "w".into(),
            Tensor::from_vec(vec![1.5f32, -2.0, 3.25], &[3]).unwrap(),
        ),
        (
            "d".into(),
            Tensor::from_vec(vec![0.1f64, 0.2, 0.3, 0.4], &[2, 2]).unwrap(),
        ),
        (
            "i".into(),
            Tensor::from_vec(vec![-7i64, 1 << 40], &[2]).unwrap(),
        ),
        (
            "b".into(),
            Tensor::from_vec(vec![true, false, true], &[3]).unwrap(),
        ),
    ]
}

#[test]
fn bytes_follow_the_format() {
    let bytes = safetensors::save(&sample(), None).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    assert!(
        header.contains("\"w\":{\"dtype\":\"F32\",\"shape\":[3]"),
        "{header}"
    );
    assert!(
        header.contains("\"i\":{\"dtype\":\"I64\",\"shape\":[2]"),
        "{header}"
    );
    let body = &bytes[8 + n..];
    // 8 + 8 + 4*3 (i64, f64, f32 sorted by alignment then name) + 3 bools
    assert_eq!(body.len(), 2 * 8 + 4 * 8 + 3 * 4 + 3);
    let start = body.len() - 3 - 12;
    let w: Vec<f32> = body[start..start + 12]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(w, vec![1.5, -2.0, 3.25]);
}

#[test]
fn round_trip_is_exact_and_keeps_metadata() {
    let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    let bytes = safetensors::save(&sample(), Some(meta.clone())).unwrap();
    let (back, m) = safetensors::load(&bytes).unwrap();
    assert_eq!(m, Some(meta));
    for (name, t) in sample() {
        let (_, u) = back.iter().find(|(n, _)| *n == name).unwrap();
        assert_eq!(u.dtype(), t.dtype());
        assert_eq!(u.shape(), t.shape());
        assert_eq!(u.to_vec::<f64>().unwrap(), t.to_vec::<f64>().unwrap());
    }
    let dir = std::env::temp_dir().join(format!("fg-st-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.safetensors");
    safetensors::save_file(&sample(), None, &path).unwrap();
    let (from_file, _) = safetensors::load_file(&path).unwrap();
    assert_eq!(from_file.len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_an_error() {
    let bytes = safetensors::save(&sample(), None).unwrap();
    for cut in [0, 5, 8, 20, bytes.len() - 1] {
        let e = safetensors::load(&bytes[..cut]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Runtime, "cut {cut}: {e}");
    }
    let twice = vec![sample()[0].clone(), sample()[0].clone()];
    assert_eq!(
        safetensors::save(&twice, None).unwrap_err().kind(),
        ErrorKind::Value
    );
    let e = safetensors::load_file(std::path::Path::new("/nonexistent/x.safetensors")).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
}
