//! Arithmetic expressions as Python's `eval` computes them.
//!
//! The suites' `calculate` tool evaluates expressions over digits, `+ - * / ( ) .`
//! and spaces with Python's `eval`; this is that subset of Python's grammar
//! (`**` and `//` included, since they are spelled with allowed characters)
//! with Python's precedence and int/float rules.

use crate::Num;

/// Evaluates `expression`; the error is the message of the exception Python
/// would raise (`division by zero`, `invalid syntax`, …).
pub fn eval(expression: &str) -> Result<Num, String> {
    let tokens = tokenize(expression)?;
    let mut parser = Parser {
        tokens,
        at: 0,
        unary: 0,
    };
    let value = parser.expression()?;
    if parser.at != parser.tokens.len() {
        return Err(SYNTAX.to_owned());
    }
    Ok(value)
}

const SYNTAX: &str = "invalid syntax (<string>, line 1)";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Number(Num),
    Plus,
    Minus,
    Star,
    Power,
    Slash,
    FloorSlash,
    Open,
    Close,
}

/// CPython's tokenizer refuses deeper nesting (`MAXLEVEL`).
const MAX_PARENTHESES: usize = 200;

/// Unary signs deeper than this end the evaluation (CPython's compiler gives
/// up on such expressions too); it bounds the parser's recursion.
const MAX_UNARY: usize = 1000;

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    let mut open = 0usize;
    while at < bytes.len() {
        let byte = bytes[at];
        let (token, width) = match byte {
            b' ' | b'\t' => {
                at += 1;
                continue;
            }
            b'+' => (Token::Plus, 1),
            b'-' => (Token::Minus, 1),
            b'*' if bytes.get(at + 1) == Some(&b'*') => (Token::Power, 2),
            b'*' => (Token::Star, 1),
            b'/' if bytes.get(at + 1) == Some(&b'/') => (Token::FloorSlash, 2),
            b'/' => (Token::Slash, 1),
            b'(' => {
                open += 1;
                if open >= MAX_PARENTHESES {
                    return Err("too many nested parentheses (<string>, line 1)".to_owned());
                }
                (Token::Open, 1)
            }
            b')' => {
                open = open.saturating_sub(1);
                (Token::Close, 1)
            }
            b'0'..=b'9' | b'.' => {
                let end = bytes[at..]
                    .iter()
                    .position(|byte| !byte.is_ascii_digit() && *byte != b'.')
                    .map_or(bytes.len(), |offset| at + offset);
                (Token::Number(number(&text[at..end])?), end - at)
            }
            _ => return Err(SYNTAX.to_owned()),
        };
        tokens.push(token);
        at += width;
    }
    Ok(tokens)
}

/// A numeric literal: an int (no leading zeros unless all zeros) or a float.
fn number(literal: &str) -> Result<Num, String> {
    if literal.matches('.').count() > 1 || literal == "." {
        return Err(SYNTAX.to_owned());
    }
    if literal.contains('.') {
        return literal
            .parse()
            .map(Num::Float)
            .map_err(|_| SYNTAX.to_owned());
    }
    if literal.len() > 1 && literal.starts_with('0') && literal.bytes().any(|byte| byte != b'0') {
        return Err(
            "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)"
                .to_owned(),
        );
    }
    Ok(literal
        .parse()
        .map(Num::Int)
        .unwrap_or_else(|_| Num::Float(literal.parse().unwrap_or(f64::INFINITY))))
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Unary signs being parsed, one inside the other.
    unary: usize,
}

impl Parser {
    fn peek(&self) -> Option<Token> {
        self.tokens.get(self.at).copied()
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.peek();
        self.at += 1;
        token
    }

    /// expression := term (("+" | "-") term)*
    fn expression(&mut self) -> Result<Num, String> {
        let mut value = self.term()?;
        while let Some(op @ (Token::Plus | Token::Minus)) = self.peek() {
            self.at += 1;
            let right = self.term()?;
            value = if op == Token::Plus {
                value + right
            } else {
                value - right
            };
        }
        Ok(value)
    }

    /// term := factor (("*" | "/" | "//") factor)*
    fn term(&mut self) -> Result<Num, String> {
        let mut value = self.factor()?;
        while let Some(op @ (Token::Star | Token::Slash | Token::FloorSlash)) = self.peek() {
            self.at += 1;
            let right = self.factor()?;
            value = match op {
                Token::Star => value * right,
                Token::Slash => value.true_div(right)?,
                _ => value.floor_div(right)?,
            };
        }
        Ok(value)
    }

    /// factor := ("+" | "-") factor | power
    fn factor(&mut self) -> Result<Num, String> {
        let sign = match self.peek() {
            Some(Token::Plus) => 1,
            Some(Token::Minus) => -1,
            _ => return self.power(),
        };
        self.at += 1;
        self.unary += 1;
        if self.unary > MAX_UNARY {
            return Err("maximum recursion depth exceeded during compilation".to_owned());
        }
        let value = self.factor()?;
        self.unary -= 1;
        Ok(if sign < 0 { -value } else { value })
    }

    /// power := atom ["**" factor]
    fn power(&mut self) -> Result<Num, String> {
        let base = self.atom()?;
        if self.peek() == Some(Token::Power) {
            self.at += 1;
            let exponent = self.factor()?;
            return Ok(base.pow(exponent)?);
        }
        Ok(base)
    }

    /// atom := number | "(" expression ")"
    fn atom(&mut self) -> Result<Num, String> {
        match self.next() {
            Some(Token::Number(value)) => Ok(value),
            Some(Token::Open) => {
                let value = self.expression()?;
                match self.next() {
                    Some(Token::Close) => Ok(value),
                    _ => Err("'(' was never closed (<string>, line 1)".to_owned()),
                }
            }
            _ => Err(SYNTAX.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values: `str(eval(expr))` in CPython 3.11.
    #[test]
    fn evaluates_like_python() {
        let cases = [
            ("1 + 2", "3"),
            ("2 * 3 + 4", "10"),
            ("2 * (3 + 4)", "14"),
            ("7 / 2", "3.5"),
            ("7 // 2", "3"),
            ("-7 // 2", "-4"),
            ("-2 ** 2", "-4"),
            ("2 ** -1", "0.5"),
            ("2 ** 3 ** 2", "512"),
            ("100.0 - 20", "80.0"),
            ("0.1 + 0.2", "0.30000000000000004"),
            ("(1500 + 2000) * 0.1", "350.0"),
            (".5 + 5.", "5.5"),
            ("00 + 1", "1"),
        ];
        for (expression, expected) in cases {
            let value = eval(expression).unwrap_or_else(|err| panic!("{expression}: {err}"));
            assert_eq!(value.to_python_string(), expected, "{expression}");
        }
    }

    #[test]
    fn errors_carry_python_messages() {
        assert_eq!(eval("1 / 0").unwrap_err(), "division by zero");
        assert_eq!(eval("1.5 / 0").unwrap_err(), "float division by zero");
        assert!(eval("1 +").unwrap_err().starts_with("invalid syntax"));
        assert!(eval("(1 + 2").unwrap_err().contains("never closed"));
        assert!(eval("1 2").unwrap_err().starts_with("invalid syntax"));
        assert!(eval("01").unwrap_err().starts_with("leading zeros"));
        let deep = format!("{}1{}", "(".repeat(250), ")".repeat(250));
        assert!(
            eval(&deep)
                .unwrap_err()
                .starts_with("too many nested parentheses")
        );
        assert!(eval(&format!("{}1", "-".repeat(5000))).is_err());
    }
}
