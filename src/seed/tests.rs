use super::*;

fn opts() -> Options {
    Options {
        files_volume: Some("kubeunit-files".into()),
        ..Options::default()
    }
}

fn refused(o: &Options, says: &str) {
    let e = o.check().unwrap_err();
    assert!(e.to_string().contains(says), "{says}: {e}");
    assert_eq!(e.exit_code(), 2);
}

#[test]
fn options_that_cannot_work_are_refused_by_name() {
    assert!(opts().check().is_ok());
    let net: Ipv4Net = "198.19.254.0/24".parse().unwrap();
    refused(
        &Options {
            files_volume: None,
            ..opts()
        },
        "no way for the host to get its binaries",
    );
    refused(
        &Options {
            gateway: Some("198.19.254.1".parse().unwrap()),
            ..opts()
        },
        "go with --network",
    );
    for gw in ["198.19.253.1", "198.19.254.0", "198.19.254.255"] {
        refused(
            &Options {
                network: Some(net),
                gateway: Some(gw.parse().unwrap()),
                ..opts()
            },
            &format!("--gateway {gw}"),
        );
    }
    for label in ["", "has space", "a-label-longer-than-16", "x\ny", "$(id)"] {
        refused(
            &Options {
                files_volume: Some(label.into()),
                ..opts()
            },
            "--files-volume",
        );
    }
    for path in ["relative/kubeunit", "/opt/../etc/kubeunit", "/opt/a\nb"] {
        refused(
            &Options {
                kubeunit: path.into(),
                ..opts()
            },
            "--kubeunit",
        );
        refused(
            &Options {
                files_dir: path.into(),
                ..opts()
            },
            "--files-dir",
        );
    }
    for glob in ["", "eth0; reboot", "an-interface-name-too-long"] {
        refused(
            &Options {
                interface: glob.into(),
                ..opts()
            },
            "--interface",
        );
    }
}

#[test]
fn network_config_is_a_static_address_with_the_gateway_as_default_route() {
    let net: Ipv4Net = "198.19.254.0/24".parse().unwrap();
    let o = Options {
        network: Some(net),
        gateway: Some("198.19.254.1".parse().unwrap()),
        nameservers: vec!["198.19.254.53".parse().unwrap()],
        ..opts()
    };
    let text = network_config(&o, net, "198.19.254.21".parse().unwrap()).unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let uplink = &doc["ethernets"]["e*"];
    assert_eq!(doc["version"], 2);
    assert_eq!(uplink["match"]["name"], "e*");
    assert_eq!(uplink["dhcp4"], false);
    assert_eq!(uplink["addresses"][0], "198.19.254.21/24");
    assert_eq!(uplink["routes"][0]["to"], "0.0.0.0/0");
    assert_eq!(uplink["routes"][0]["via"], "198.19.254.1");
    assert_eq!(uplink["nameservers"]["addresses"][0], "198.19.254.53");
    // Without a gateway there is no default route: nothing leaves the hosts' network.
    let alone = network_config(
        &Options {
            network: Some(net),
            ..opts()
        },
        net,
        "198.19.254.21".parse().unwrap(),
    )
    .unwrap();
    assert!(
        !alone.contains("routes") && !alone.contains("nameservers"),
        "{alone}"
    );
}

#[test]
fn a_file_keeps_its_bytes_and_mode() {
    let f = WriteFile::new("/root/x".into(), b"\x00key\n'\"", 0o600);
    assert_eq!(f.permissions, "0600");
    let text = cloud_config::yaml("#cloud-config\n", &f).unwrap();
    let back: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    // A YAML 1.1 reader (cloud-init's PyYAML) would read a bare 0600 as the number 384.
    assert!(text.contains("permissions: '0600'"), "{text}");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(back["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, b"\x00key\n'\"");
}
