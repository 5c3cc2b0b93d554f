//! `calculator`: evaluates an arithmetic expression.

use std::convert::Infallible;

use lmstack::function::{Tool, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

/// The arguments of `calculator`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Arguments {
    /// An arithmetic expression: numbers, `+ - * / % ^`, parentheses, `sqrt(…)`,
    /// `abs(…)`, `pi` and `e`. For example `(1 + 2) * 3 ^ 2`.
    pub expression: String,
}

/// The tool.
pub fn tool() -> Tool {
    Tool::typed(
        "calculator",
        "Evaluates an arithmetic expression exactly as written and returns its value.",
        |args: Arguments| async move {
            Ok::<_, Infallible>(match evaluate(&args.expression) {
                Ok(value) => {
                    ToolOutput::text(format!("{} = {}", args.expression.trim(), format(value)))
                }
                Err(error) => {
                    ToolOutput::error(format!("cannot evaluate {:?}: {error}", args.expression))
                }
            })
        },
    )
}

/// The longest expression accepted, in bytes.
const MAX_LENGTH: usize = 1000;
/// The deepest nesting accepted (parentheses, unary signs, powers).
const MAX_DEPTH: usize = 64;

/// Evaluates `expression`.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    if expression.len() > MAX_LENGTH {
        return Err(format!("the expression is longer than {MAX_LENGTH} bytes"));
    }
    let mut parser = Parser {
        text: expression.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = parser.expression()?;
    parser.skip_spaces();
    if parser.at < parser.text.len() {
        return Err(format!(
            "unexpected {:?} at position {}",
            parser.rest(),
            parser.at + 1
        ));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number".into());
    }
    Ok(value)
}

/// Integers without a fraction; other numbers as Rust prints them.
fn format(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn expression(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        while let Some(op) = self.eat_any(b"+-") {
            let rhs = self.term()?;
            value = if op == b'+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        while let Some(op) = self.eat_any(b"*/%") {
            let rhs = self.unary()?;
            if op != b'*' && rhs == 0.0 {
                return Err("division by zero".into());
            }
            value = match op {
                b'*' => value * rhs,
                b'/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    /// A sign binds looser than `^`: `-2 ^ 2` is -4.
    fn unary(&mut self) -> Result<f64, String> {
        match self.eat_any(b"+-") {
            Some(b'-') => Ok(-self.nested(Self::unary)?),
            Some(_) => self.nested(Self::unary),
            None => self.power(),
        }
    }

    /// `primary ('^' unary)?`: right-associative, and `2 ^ -1` works.
    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if self.eat_any(b"^").is_none() {
            return Ok(base);
        }
        let exponent = self.nested(Self::unary)?;
        Ok(base.powf(exponent))
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.skip_spaces();
        match self.text.get(self.at) {
            Some(b'(') => {
                self.at += 1;
                let value = self.nested(Self::expression)?;
                self.expect(b')')?;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || *c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() => self.name(),
            Some(_) => Err(format!(
                "unexpected {:?} at position {}",
                self.rest(),
                self.at + 1
            )),
            None => Err("the expression ends too early".into()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        digits
            .parse()
            .map_err(|_| format!("{digits:?} is not a number"))
    }

    fn name(&mut self) -> Result<f64, String> {
        let start = self.at;
        while self.text.get(self.at).is_some_and(u8::is_ascii_alphabetic) {
            self.at += 1;
        }
        let name = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        let function: fn(f64) -> f64 = match name {
            "pi" => return Ok(std::f64::consts::PI),
            "e" => return Ok(std::f64::consts::E),
            "sqrt" => f64::sqrt,
            "abs" => f64::abs,
            _ => return Err(format!("unknown name {name:?}")),
        };
        self.expect(b'(')?;
        let argument = self.nested(Self::expression)?;
        self.expect(b')')?;
        Ok(function(argument))
    }

    /// Runs `parse` one level deeper, within the depth limit.
    fn nested(&mut self, parse: fn(&mut Self) -> Result<f64, String>) -> Result<f64, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            ));
        }
        self.depth += 1;
        let value = parse(self);
        self.depth -= 1;
        value
    }

    fn eat_any(&mut self, ops: &[u8]) -> Option<u8> {
        self.skip_spaces();
        let op = *self.text.get(self.at)?;
        ops.contains(&op).then(|| {
            self.at += 1;
            op
        })
    }

    fn expect(&mut self, wanted: u8) -> Result<(), String> {
        match self.eat_any(&[wanted]) {
            Some(_) => Ok(()),
            None => Err(format!(
                "expected {:?} at position {}",
                wanted as char,
                self.at + 1
            )),
        }
    }

    fn skip_spaces(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.text[self.at..])
            .chars()
            .take(10)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(evaluate("1 + 2 * 3").unwrap(), 7.0);
        assert_eq!(evaluate("(1 + 2) * 3").unwrap(), 9.0);
        assert_eq!(evaluate("2 ^ 3 ^ 2").unwrap(), 512.0);
        assert_eq!(evaluate("-2 ^ 2").unwrap(), -4.0);
        assert_eq!(evaluate("2 ^ -1").unwrap(), 0.5);
        assert_eq!(evaluate("10 - 4 - 3").unwrap(), 3.0);
        assert_eq!(evaluate("17 % 5 + sqrt(16) + abs(-1)").unwrap(), 7.0);
        assert_eq!(format(evaluate("1234 * 5678").unwrap()), "7006652");
        assert_eq!(format(evaluate("1 / 4").unwrap()), "0.25");
    }

    #[test]
    fn bad_expressions_are_clear_errors() {
        assert_eq!(evaluate("1 / 0").unwrap_err(), "division by zero");
        assert_eq!(
            evaluate("2 +").unwrap_err(),
            "the expression ends too early"
        );
        assert_eq!(
            evaluate("2 $ 3").unwrap_err(),
            "unexpected \"$ 3\" at position 3"
        );
        assert_eq!(evaluate("foo(1)").unwrap_err(), "unknown name \"foo\"");
        assert_eq!(
            evaluate("(1 + 2").unwrap_err(),
            "expected ')' at position 7"
        );
        assert_eq!(evaluate("1.2.3").unwrap_err(), "\"1.2.3\" is not a number");
        assert!(
            evaluate(&"(".repeat(500))
                .unwrap_err()
                .contains("nests deeper")
        );
        assert!(
            evaluate(&"-".repeat(500))
                .unwrap_err()
                .contains("nests deeper")
        );
        assert!(
            evaluate(&"1+".repeat(600))
                .unwrap_err()
                .contains("longer than")
        );
        assert_eq!(
            evaluate("10 ^ 400").unwrap_err(),
            "the result is not a finite number"
        );
    }
}
