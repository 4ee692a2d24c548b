//! `DATABASE_URL` naming several hosts, the way libpq takes them
//! (`postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write`). sqlx connects to one host
//! (transact-rs/sqlx#3333), so the list is split here into one single-host URL per host, in
//! order; [`super::primary`] finds the one that takes writes.

/// What a `DATABASE_URL` names: one host, or several of which one is the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    /// One host: the URL as given, used exactly as before multi-host support.
    One(String),
    /// Several hosts, each as a single-host URL, in the order the URL lists them.
    Several(Vec<String>),
}

/// The only sessions the service can use: it writes.
const WRITABLE: [&str; 2] = ["read-write", "primary"];
const DEFAULT_PORT: &str = "5432";

pub fn parse(url: &str) -> Result<Hosts, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(Hosts::One(url.to_owned()));
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(authority_end);
    let (userinfo, host_list) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let (path, query) = match path_and_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_and_query, None),
    };
    let mut kept = Vec::new();
    let mut session_attrs = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("target_session_attrs", value)) => session_attrs = Some(value),
            _ => kept.push(pair),
        }
    }
    if let Some(value) = session_attrs
        && !WRITABLE.contains(&value)
    {
        return Err(format!(
            "target_session_attrs={value} is not supported: the service writes, so it always \
             connects to the primary (read-write)"
        ));
    }
    let hosts: Vec<&str> = host_list.split(',').collect();
    if hosts.len() == 1 && session_attrs.is_none() {
        return Ok(Hosts::One(url.to_owned()));
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    let urls: Result<Vec<String>, String> = hosts
        .iter()
        .map(|host| {
            let host = with_port(host)?;
            Ok(format!("{scheme}://{userinfo}{host}{path}{query}"))
        })
        .collect();
    let mut urls = urls?;
    Ok(match urls.len() {
        1 => Hosts::One(urls.remove(0)),
        _ => Hosts::Several(urls),
    })
}

/// `host:port`, adding libpq's default port where the URL gives none.
fn with_port(host: &str) -> Result<String, String> {
    if host.is_empty() {
        return Err("DATABASE_URL has an empty host in its host list".into());
    }
    // An IPv6 address is bracketed: its own colons are not a port.
    let after_address = host.rfind(']').map_or(0, |i| i + 1);
    match host[after_address..].split_once(':') {
        Some((_, "")) => Ok(format!("{}{DEFAULT_PORT}", host)),
        Some((_, port)) if port.parse::<u16>().is_err() => Err(format!(
            "DATABASE_URL host {host} has a port that is not a number"
        )),
        Some(_) => Ok(host.to_owned()),
        None => Ok(format!("{host}:{DEFAULT_PORT}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_is_used_exactly_as_given() {
        let url = "postgres://u:p@db:6432/ledger?sslmode=disable";
        assert_eq!(parse(url), Ok(Hosts::One(url.to_owned())));
        assert_eq!(
            parse("postgres:///x"),
            Ok(Hosts::One("postgres:///x".into()))
        );
    }

    #[test]
    fn several_hosts_become_one_url_each_in_order_without_the_session_attribute() {
        let hosts = parse(
            "postgres://u:p%40ss@h1:5433,h2,[::1]:5435/ledger?sslmode=disable&target_session_attrs=read-write&application_name=x",
        );
        assert_eq!(
            hosts,
            Ok(Hosts::Several(vec![
                "postgres://u:p%40ss@h1:5433/ledger?sslmode=disable&application_name=x".into(),
                "postgres://u:p%40ss@h2:5432/ledger?sslmode=disable&application_name=x".into(),
                "postgres://u:p%40ss@[::1]:5435/ledger?sslmode=disable&application_name=x".into(),
            ]))
        );
    }

    #[test]
    fn one_host_asked_for_read_write_drops_the_attribute_sqlx_does_not_know() {
        assert_eq!(
            parse("postgresql://h:1/d?target_session_attrs=primary"),
            Ok(Hosts::One("postgresql://h:1/d".into()))
        );
    }

    #[test]
    fn a_session_attribute_other_than_writable_and_broken_host_lists_are_refused() {
        for url in [
            "postgres://h1,h2/d?target_session_attrs=read-only",
            "postgres://h1,h2/d?target_session_attrs=any",
            "postgres://h1,,h2/d",
            "postgres://h1:x,h2/d",
        ] {
            assert!(parse(url).is_err(), "{url}");
        }
    }
}
