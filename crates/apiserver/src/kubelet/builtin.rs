//! The safe default behaviour: no host program ever runs.

use super::{ContainerRef, ExecSession, Output, SessionKind};
use futures::stream::BoxStream;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Log lines that say which container they come from.
pub(super) fn logs(c: &ContainerRef) -> BoxStream<'static, String> {
    Box::pin(futures::stream::iter(vec![
        format!(
            "kubewright: container {} of pod {}/{} started (image {:?})",
            c.container, c.pod.namespace, c.pod.name, c.image
        ),
        format!(
            "kubewright: this is a simulated container; exec supports: {}",
            COMMANDS.join(", ")
        ),
    ]))
}

/// The built-in commands.
pub(super) const COMMANDS: &[&str] = &[
    "echo", "cat", "env", "hostname", "true", "false", "sleep", "sh -c", "exit",
];

async fn out(w: &mut Option<Output>, s: &str) {
    if let Some(w) = w.as_mut() {
        let _ = w.write_all(s.as_bytes()).await;
        let _ = w.flush().await;
    }
}

/// Exec and attach with the built-in commands.
pub(super) async fn exec(mut s: ExecSession) -> i32 {
    if s.kind == SessionKind::Attach {
        return attach(s).await;
    }
    let command = std::mem::take(&mut s.command);
    run(&mut s, &command, 0).await
}

/// Attach: with stdin, what comes in goes out (like `cat` as the main process); without,
/// a line that says where the client is.
async fn attach(mut s: ExecSession) -> i32 {
    match s.stdin.take() {
        Some(mut stdin) => copy(&mut stdin, &mut s.stdout).await,
        None => {
            let msg = format!(
                "kubewright: attached to container {} of pod {}/{} (simulated; send stdin to have it echoed)\n",
                s.container.container, s.container.pod.namespace, s.container.pod.name
            );
            out(&mut s.stdout, &msg).await;
            0
        }
    }
}

async fn copy(stdin: &mut super::Stdin, to: &mut Option<Output>) -> i32 {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => return 0,
            Ok(n) => {
                if let Some(w) = to.as_mut()
                    && (w.write_all(&buf[..n]).await.is_err() || w.flush().await.is_err())
                {
                    return 1;
                }
            }
        }
    }
}

/// Splits a `sh -c` script into words (single and double quotes, no expansion).
fn words(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for ch in script.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Runs one command (boxed: `sh -c` recurses).
fn run<'a>(
    s: &'a mut ExecSession,
    argv: &'a [String],
    depth: u8,
) -> futures::future::BoxFuture<'a, i32> {
    Box::pin(async move {
        let Some((cmd, args)) = argv.split_first() else {
            return 0;
        };
        let name = cmd.rsplit('/').next().unwrap_or(cmd);
        match name {
            "echo" => {
                let (newline, args) = match args.first().map(String::as_str) {
                    Some("-n") => (false, &args[1..]),
                    _ => (true, args),
                };
                let mut text = args.join(" ");
                if newline {
                    text.push('\n');
                }
                out(&mut s.stdout, &text).await;
                0
            }
            "cat" if args.is_empty() || args == ["-"] => match s.stdin.take() {
                Some(mut stdin) => copy(&mut stdin, &mut s.stdout).await,
                None => 0,
            },
            "cat" => {
                for a in args {
                    out(
                        &mut s.stderr,
                        &format!("cat: {a}: No such file or directory\n"),
                    )
                    .await;
                }
                1
            }
            "env" | "printenv" => {
                let text: String = s.env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
                out(&mut s.stdout, &text).await;
                0
            }
            "hostname" => {
                let text = format!("{}\n", s.container.pod.name);
                out(&mut s.stdout, &text).await;
                0
            }
            "true" | ":" => 0,
            "false" => 1,
            "exit" => args
                .first()
                .map_or(Some(0), |a| a.parse::<i32>().ok())
                .map_or(2, |n| n & 0xff),
            "sleep" => {
                let secs = args
                    .first()
                    .and_then(|a| a.parse::<f64>().ok())
                    .unwrap_or(0.0);
                let d = std::time::Duration::try_from_secs_f64(secs.clamp(0.0, 3600.0))
                    .unwrap_or_default();
                tokio::time::sleep(d).await;
                0
            }
            "sh" | "bash" | "ash"
                if args.first().map(String::as_str) == Some("-c") && depth < 4 =>
            {
                let script = args.get(1).map(String::as_str).unwrap_or("");
                let mut code = 0;
                for part in script.split([';', '\n']) {
                    let argv = words(part);
                    if argv.is_empty() {
                        continue;
                    }
                    let exits = argv[0] == "exit";
                    code = run(s, &argv, depth + 1).await;
                    if exits {
                        break;
                    }
                }
                code
            }
            "sh" | "bash" | "ash" if args.is_empty() && depth == 0 => shell(s).await,
            _ => {
                let msg = format!(
                    "kubewright: {cmd}: command not found (the simulated container runs no programs; built-ins: {})\n",
                    COMMANDS.join(", ")
                );
                let target = if s.stderr.is_some() {
                    &mut s.stderr
                } else {
                    &mut s.stdout
                };
                out(target, &msg).await;
                127
            }
        }
    })
}

/// An interactive shell over the built-ins: one command per line of stdin.
async fn shell(s: &mut ExecSession) -> i32 {
    let Some(stdin) = s.stdin.take() else {
        return 0;
    };
    let mut stdin = tokio::io::BufReader::new(stdin);
    let mut code = 0;
    loop {
        if s.tty {
            out(&mut s.stdout, "$ ").await;
        }
        let line = match read_line(&mut stdin).await {
            Line::End => return code,
            Line::TooLong => {
                let msg = format!("sh: a line over {MAX_SHELL_LINE} bytes\n");
                let target = if s.stderr.is_some() {
                    &mut s.stderr
                } else {
                    &mut s.stdout
                };
                out(target, &msg).await;
                code = 2;
                continue;
            }
            Line::Text(line) => line,
        };
        let line = line.trim_end_matches('\r');
        let argv = words(line);
        if argv.first().map(String::as_str) == Some("exit") {
            return run(s, &argv, 1).await;
        }
        code = run(s, &argv, 1).await;
    }
}

/// The longest line the built-in shell reads; a longer one is refused (and skipped to
/// its end) instead of buffered without bound.
const MAX_SHELL_LINE: usize = 64 * 1024;

enum Line {
    Text(String),
    TooLong,
    End,
}

/// Reads one line of at most [`MAX_SHELL_LINE`] bytes.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Line {
    let mut buf = Vec::new();
    match (&mut *r)
        .take(MAX_SHELL_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .await
    {
        Ok(0) | Err(_) => return Line::End,
        Ok(_) => {}
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Line::Text(String::from_utf8_lossy(&buf).into_owned());
    }
    if buf.len() <= MAX_SHELL_LINE {
        // The last line, without a newline.
        return Line::Text(String::from_utf8_lossy(&buf).into_owned());
    }
    // Skip the rest of the long line, a buffer at a time.
    loop {
        let (skip, found) = match r.fill_buf().await {
            Ok([]) | Err(_) => return Line::TooLong,
            Ok(b) => match b.iter().position(|&c| c == b'\n') {
                Some(i) => (i + 1, true),
                None => (b.len(), false),
            },
        };
        r.consume(skip);
        if found {
            return Line::TooLong;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shell_lines_are_bounded() {
        let long = "x".repeat(MAX_SHELL_LINE * 3);
        let input = format!("echo a\r\n{long}\necho b\nlast");
        let mut r = tokio::io::BufReader::new(input.as_bytes());
        let mut got = Vec::new();
        loop {
            match read_line(&mut r).await {
                Line::End => break,
                Line::TooLong => got.push("<too long>".to_string()),
                Line::Text(t) => got.push(t),
            }
        }
        assert_eq!(got, ["echo a\r", "<too long>", "echo b", "last"]);
    }

    #[test]
    fn shell_words() {
        assert_eq!(words("exit 3"), ["exit", "3"]);
        assert_eq!(words(r#"echo "a b" 'c'"#), ["echo", "a b", "c"]);
        assert_eq!(words("  "), Vec::<String>::new());
        assert_eq!(words("echo ''"), ["echo", ""]);
    }
}
