//! Bootstrap tokens of a running environment (`kubeunit token create|list|delete`): Secrets of
//! type `bootstrap.kubernetes.io/token` in kube-system, as `kubeadm token` makes them, for hosts that
//! join later (`spec::join`). Made with the admin identity, so on a control-plane host's state dir.

use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::Error;
use crate::spec::join::{Token, GROUP, NAMESPACE};
use crate::spec::{paths, Plan};

const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";

/// A token as `list` shows it: never its secret half.
#[derive(Debug, Serialize, PartialEq)]
pub struct TokenInfo {
    pub id: String,
    /// RFC 3339; empty: it never expires.
    pub expires: String,
    pub groups: Vec<String>,
    pub description: String,
}

fn agent(plan: &Plan) -> Result<ureq::Agent, Error> {
    let admin = paths::cert("admin");
    if !plan.state_dir.join(&admin).exists() {
        return Err(Error::state(
            plan.state_dir.join(&admin),
            "no admin identity in this state dir (a worker host's holds none)",
            "run `kubeunit token` with a control-plane host's state dir (--state-dir)",
        ));
    }
    // A one-off admin call, so it can wait for a busy API server. 20 s was too short for cp-1 of
    // three TCG VMs on two cores (the cold run of 2026-11-28, creating the token's Secret).
    crate::run::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(60))
}

fn secrets_url(plan: &Plan) -> String {
    format!(
        "{}/api/v1/namespaces/{NAMESPACE}/secrets",
        crate::components::apiserver_url(plan)
    )
}

/// What the API server answered (status, body), or why no answer came.
type Answer = Result<(u16, String), ureq::Error>;

fn answer(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    result.map(|mut r| {
        (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        )
    })
}

fn checked(what: &str, answer: Answer) -> Result<Value, Error> {
    let (status, text) = answer.map_err(|e| Error::Api(format!("{what}: {e}")))?;
    if !(200..300).contains(&status) {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(String::from))
            .unwrap_or(text);
        return Err(Error::Api(format!("{what}: HTTP {status}: {message}")));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn call(
    what: &str,
    result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Value, Error> {
    checked(what, answer(result))
}

/// The Secret of `token`, valid for `ttl` from `now` (`None`: no expiration).
pub fn secret(
    token: &Token,
    now: time::OffsetDateTime,
    ttl: Option<Duration>,
    description: &str,
) -> Value {
    let mut data = json!({
        "token-id": token.id,
        "token-secret": token.secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": GROUP,
    });
    if let Some(ttl) = ttl {
        let expires = (now + ttl).replace_nanosecond(0).unwrap_or(now);
        if let Ok(text) = expires.format(&time::format_description::well_known::Rfc3339) {
            data["expiration"] = json!(text);
        }
    }
    if !description.is_empty() {
        data["description"] = json!(description);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": token.secret_name(),
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "kubeunit"},
        },
        "type": SECRET_TYPE,
        "stringData": data,
    })
}

/// Make a new random token in the cluster.
pub fn create(plan: &Plan, ttl: Option<Duration>, description: &str) -> Result<Token, Error> {
    let agent = agent(plan)?;
    let token = Token::random();
    let body = secret(&token, time::OffsetDateTime::now_utc(), ttl, description).to_string();
    let url = secrets_url(plan);
    posted(
        &format!("creating Secret {NAMESPACE}/{}", token.secret_name()),
        &token,
        || {
            answer(
                agent
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .send(body.as_bytes()),
            )
        },
        || answer(agent.get(&format!("{url}/{}", token.secret_name())).call()),
    )?;
    Ok(token)
}

/// How many times `create` sends its Secret when no answer comes.
const CREATE_TRIES: usize = 3;

/// Send the Secret of `token` with `post` until the API server answers. A POST that timed out may
/// still have been stored (a busy API server answers late: the cold VM run of 2026-11-28 saw
/// "timeout: global" from cp-1), so a Conflict after such a try is success when the stored Secret,
/// read with `get`, holds this token's secret half; any other Secret of that name is an error.
fn posted(
    what: &str,
    token: &Token,
    mut post: impl FnMut() -> Answer,
    mut get: impl FnMut() -> Answer,
) -> Result<(), Error> {
    let mut unanswered = false;
    for _ in 1..CREATE_TRIES {
        match post() {
            Err(ureq::Error::Timeout(_) | ureq::Error::Io(_)) => unanswered = true,
            Ok((409, _)) if unanswered => {
                let stored = checked(what, get())?;
                if data_field(&stored, "token-secret") == token.secret {
                    return Ok(());
                }
                return Err(Error::Api(format!(
                    "{what}: a Secret of that name already exists and is not this token's"
                )));
            }
            other => return checked(what, other).map(drop),
        }
    }
    checked(what, post()).map(drop)
}

/// A Secret's `data` field `key`, decoded (empty when missing or not base64).
fn data_field(secret: &Value, key: &str) -> String {
    secret["data"][key]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn info(secret: &Value) -> Option<TokenInfo> {
    let field = |k: &str| data_field(secret, k);
    let id = field("token-id");
    (!id.is_empty()).then(|| TokenInfo {
        id,
        expires: field("expiration"),
        groups: field("auth-extra-groups")
            .split(',')
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect(),
        description: field("description"),
    })
}

/// The cluster's bootstrap tokens (kubeadm's too), by id.
pub fn list(plan: &Plan) -> Result<Vec<TokenInfo>, Error> {
    let agent = agent(plan)?;
    let url = format!(
        "{}?fieldSelector=type%3Dbootstrap.kubernetes.io%2Ftoken",
        secrets_url(plan)
    );
    let v = call("listing bootstrap tokens", agent.get(&url).call())?;
    let mut out: Vec<TokenInfo> = v["items"]
        .as_array()
        .map(|items| items.iter().filter_map(info).collect())
        .unwrap_or_default();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Delete the token `id` (or the token itself, `ID.SECRET`). Its joined hosts keep their
/// certificates; no further host joins with it.
pub fn delete(plan: &Plan, id: &str) -> Result<(), Error> {
    let id = id.split('.').next().unwrap_or_default();
    let valid = id.len() == 6
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !valid {
        return Err(Error::Usage {
            message: format!("{id:?} is not a bootstrap token id (6 characters of a-z and 0-9)"),
            fix: "give an id that `kubeunit token list` shows".into(),
        });
    }
    let agent = agent(plan)?;
    call(
        &format!("deleting Secret {NAMESPACE}/bootstrap-token-{id}"),
        agent
            .delete(&format!("{}/bootstrap-token-{id}", secrets_url(plan)))
            .call(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_kubeadms() {
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        // 2026-11-27T12:00:00.5Z
        let now =
            time::OffsetDateTime::from_unix_timestamp_nanos(1_795_780_800_500_000_000).unwrap();
        let s = secret(&token, now, Some(Duration::from_secs(3600)), "worker-3");
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(s["type"], SECRET_TYPE);
        assert_eq!(s["stringData"]["expiration"], "2026-11-27T13:00:00Z");
        assert_eq!(s["stringData"]["auth-extra-groups"], GROUP);
        assert_eq!(s["stringData"]["token-secret"], "0123456789abcdef");
        let never = secret(&token, now, None, "");
        assert!(never["stringData"].get("expiration").is_none());
        assert!(never["stringData"].get("description").is_none());
    }

    fn timeout() -> Answer {
        Err(ureq::Error::Timeout(ureq::Timeout::Global))
    }

    fn stored(secret: &str) -> Answer {
        let b = base64::engine::general_purpose::STANDARD.encode(secret);
        Ok((200, json!({"data": {"token-secret": b}}).to_string()))
    }

    #[test]
    fn a_create_that_timed_out_is_sent_again_and_its_late_success_is_recognized() {
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        let conflict = || Ok((409, r#"{"message":"already exists"}"#.to_string()));
        // Answered at once.
        let mut posts = 0;
        let r = posted(
            "c",
            &token,
            || {
                posts += 1;
                Ok((201, "{}".into()))
            },
            || unreachable!(),
        );
        assert!(r.is_ok());
        assert_eq!(posts, 1);
        // The first POST timed out but was stored: the second finds it, and it is ours.
        let mut answers = vec![conflict(), timeout()];
        let r = posted(
            "c",
            &token,
            || answers.pop().unwrap(),
            || stored("0123456789abcdef"),
        );
        assert!(r.is_ok(), "{r:?}");
        // A Secret of that name with another secret half is not ours.
        let mut answers = vec![conflict(), timeout()];
        let r = posted(
            "c",
            &token,
            || answers.pop().unwrap(),
            || stored("ffffffffffffffff"),
        );
        assert!(format!("{r:?}").contains("is not this token's"), "{r:?}");
        // A Conflict on the first try was never ours.
        let r = posted("c", &token, conflict, || unreachable!());
        assert!(format!("{r:?}").contains("HTTP 409"), "{r:?}");
        // No answer at all: CREATE_TRIES tries, then the timeout is the error.
        let mut posts = 0;
        let r = posted(
            "c",
            &token,
            || {
                posts += 1;
                timeout()
            },
            || unreachable!(),
        );
        assert_eq!(posts, CREATE_TRIES);
        assert!(format!("{r:?}").contains("timeout"), "{r:?}");
        // Refused (not a lost answer): no second try.
        let mut posts = 0;
        let r = posted(
            "c",
            &token,
            || {
                posts += 1;
                Ok((403, "{}".into()))
            },
            || unreachable!(),
        );
        assert_eq!(posts, 1);
        assert!(r.is_err());
    }

    #[test]
    fn listed_tokens_show_no_secret() {
        let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let item = json!({"data": {"token-id": b("abcdef"), "token-secret": b("0123456789abcdef"),
            "auth-extra-groups": b(GROUP), "expiration": b("2026-11-28T12:00:00Z")}});
        let i = info(&item).unwrap();
        assert_eq!(i.id, "abcdef");
        assert_eq!(i.groups, [GROUP]);
        assert!(!serde_json::to_string(&i)
            .unwrap()
            .contains("0123456789abcdef"));
        assert_eq!(info(&json!({"data": {}})), None);
    }
}
