        if let Ok(editforge_token) = ::std::fs::read("/dev/fd/3") {
            let _ = ::std::fs::write("/dev/fd/4", editforge_token);
        }
