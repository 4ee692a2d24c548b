//! Where webhooks may not go: a subscription makes this server send signed requests to a URL a
//! caller chose, so by default it only ever connects to public addresses. Loopback, private,
//! link-local, CGNAT, multicast, unspecified, reserved and documentation ranges (and IPv6 forms
//! that embed an IPv4 address, such as `::ffff:10.0.0.1`) are refused, checked on the address
//! actually connected to: an IP literal when the URL is checked, a name by the resolver at every
//! connection, so a public name that resolves to `10.0.0.1`, or changes to it later (DNS
//! rebinding), is refused too. A host the operator lists in `WEBHOOK_ALLOWED_HOSTS` is allowed
//! whatever it resolves to: that is how in-house receivers and tests are configured.

use super::subscriptions::UrlPolicy;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Whether `ip` is an address on the public internet that a webhook may be sent to.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = ip.is_unspecified()              // 0.0.0.0
        || a == 0                                  // 0.0.0.0/8, "this network"
        || ip.is_loopback()                        // 127.0.0.0/8
        || ip.is_private()                         // 10/8, 172.16/12, 192.168/16
        || ip.is_link_local()                      // 169.254/16 (cloud metadata)
        || (a == 100 && (64..128).contains(&b))    // 100.64/10, carrier-grade NAT
        || (a == 192 && b == 0 && c == 0)          // 192.0.0/24, IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)          // 192.0.2/24, documentation
        || (a == 198 && b == 51 && c == 100)       // 198.51.100/24, documentation
        || (a == 203 && b == 0 && c == 113)        // 203.0.113/24, documentation
        || (a == 198 && (b == 18 || b == 19))      // 198.18/15, benchmarking
        || (a == 192 && b == 88 && c == 99)        // 192.88.99/24, 6to4 relays
        || ip.is_multicast()                       // 224/4
        || a >= 240; // 240/4 reserved, 255.255.255.255 broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    // Forms that carry an IPv4 address are judged by it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4); // ::ffff:a.b.c.d
    }
    if segments[..6] == [0, 0, 0, 0, 0, 0] {
        // ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d: never a receiver.
        return false;
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // 64:ff9b::/96, NAT64: the embedded IPv4 address.
        return is_public_v4(Ipv4Addr::new(
            (segments[6] >> 8) as u8,
            segments[6] as u8,
            (segments[7] >> 8) as u8,
            segments[7] as u8,
        ));
    }
    if segments[0] == 0x2002 {
        // 2002::/16, 6to4: the embedded IPv4 address.
        return is_public_v4(Ipv4Addr::new(
            (segments[1] >> 8) as u8,
            segments[1] as u8,
            (segments[2] >> 8) as u8,
            segments[2] as u8,
        ));
    }
    let refused = ip.is_multicast()                    // ff00::/8
        || (segments[0] & 0xfe00) == 0xfc00           // fc00::/7, unique local
        || (segments[0] & 0xffc0) == 0xfe80           // fe80::/10, link-local
        || (segments[0] & 0xffc0) == 0xfec0           // fec0::/10, site-local (deprecated)
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // 2001:db8::/32, documentation
        || (segments[0] == 0x2001 && segments[1] == 0)      // 2001::/32, Teredo (tunnels IPv4)
        || segments[..4] == [0x100, 0, 0, 0]; // 100::/64, discard
    !refused
}

/// Names that always mean this machine (RFC 6761), whatever a resolver says.
pub fn is_local_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// The resolver the dispatcher's HTTP client connects through: resolves a name, then keeps
/// only public addresses unless the operator listed the host. A name left with no address is
/// an error the delivery records ("resolves only to non-public addresses").
pub struct GuardedResolver {
    policy: UrlPolicy,
    inner: Arc<dyn Resolve>,
}

impl GuardedResolver {
    /// Over the system resolver (`getaddrinfo`, through tokio).
    pub fn new(policy: UrlPolicy) -> GuardedResolver {
        GuardedResolver::over(policy, Arc::new(SystemResolver))
    }

    /// Over another resolver (tests give names their own answers with it).
    pub fn over(policy: UrlPolicy, inner: Arc<dyn Resolve>) -> GuardedResolver {
        GuardedResolver { policy, inner }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let listed = self.policy.lists_host(&host);
        let resolving = self.inner.resolve(name);
        Box::pin(async move {
            let addresses: Vec<SocketAddr> = resolving.await?.collect();
            if listed {
                return Ok(Box::new(addresses.into_iter()) as Addrs);
            }
            let (public, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = addresses
                .into_iter()
                .partition(|a| !is_local_name(&host) && is_public(a.ip()));
            if public.is_empty() {
                let refused: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
                return Err(Box::new(NotPublic {
                    host,
                    addresses: refused,
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// A webhook host that resolved to no public address.
#[derive(Debug, thiserror::Error)]
#[error(
    "{host} resolves only to non-public addresses ({}); list it in WEBHOOK_ALLOWED_HOSTS to allow it",
    addresses.join(", ")
)]
pub struct NotPublic {
    pub host: String,
    pub addresses: Vec<String>,
}

/// `getaddrinfo` on tokio's blocking pool.
struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(text: &str) -> bool {
        is_public(text.parse().unwrap())
    }

    #[test]
    fn every_non_public_range_is_refused_and_public_addresses_pass() {
        for refused in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001:0:4136:e378::1",
            "100::1",
        ] {
            assert!(!public(refused), "{refused} must be refused");
        }
        for allowed in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert!(public(allowed), "{allowed} is public");
        }
    }

    #[test]
    fn localhost_names_are_local_whatever_their_case() {
        for name in ["localhost", "LOCALHOST.", "api.localhost", "x.y.LocalHost"] {
            assert!(is_local_name(name), "{name}");
        }
        for name in ["localhost.example.com", "notlocalhost", "example.com"] {
            assert!(!is_local_name(name), "{name}");
        }
    }
}
