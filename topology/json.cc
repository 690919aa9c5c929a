// JSON writer and recursive-descent parser (RFC 8259 subset: no \u escapes
// beyond Latin-1, which topology text never needs).
#include "topology/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lanes::topo {

const Json& Json::operator[](const std::string& key) const {
  static const Json kNull;
  auto it = fields_.find(key);
  return it == fields_.end() ? kNull : it->second;
}

Json& Json::set(const std::string& key, Json value) {
  if (fields_.count(key) == 0) order_.push_back(key);
  fields_[key] = std::move(value);
  return *this;
}

Json& Json::push(Json value) {
  items_.push_back(std::move(value));
  return *this;
}

namespace {

void writeString(std::string* out, const std::string& s) {
  *out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      *out += c;
    }
  }
  *out += '"';
}

struct Parser {
  const std::string& s;
  size_t i = 0;
  std::string error;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool fail(const std::string& what) {
    if (error.empty()) error = what + " at byte " + std::to_string(i);
    return false;
  }
  bool lit(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(i, n, word) != 0) return false;
    i += n;
    return true;
  }
  bool string(std::string* out) {
    if (i >= s.size() || s[i] != '"') return fail("expected a string");
    ++i;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i >= s.size()) break;
      char e = s[i++];
      switch (e) {
        case 'n':
          *out += '\n';
          break;
        case 't':
          *out += '\t';
          break;
        case 'r':
          *out += '\r';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'u': {
          if (i + 4 > s.size()) return fail("short \\u escape");
          *out += static_cast<char>(std::strtol(s.substr(i, 4).c_str(), nullptr, 16));
          i += 4;
          break;
        }
        default:
          *out += e;
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;
    return true;
  }
  bool value(Json* out, int depth) {
    if (depth > 64) return fail("nesting too deep");
    ws();
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '{') {
      ++i;
      *out = Json::object();
      ws();
      if (i < s.size() && s[i] == '}') return ++i, true;
      for (;;) {
        ws();
        std::string key;
        if (!string(&key)) return false;
        ws();
        if (i >= s.size() || s[i] != ':') return fail("expected ':'");
        ++i;
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->set(key, std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') {
          ++i;
          continue;
        }
        if (i < s.size() && s[i] == '}') return ++i, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++i;
      *out = Json::array();
      ws();
      if (i < s.size() && s[i] == ']') return ++i, true;
      for (;;) {
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->push(std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') {
          ++i;
          continue;
        }
        if (i < s.size() && s[i] == ']') return ++i, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      std::string str;
      if (!string(&str)) return false;
      *out = Json(std::move(str));
      return true;
    }
    if (lit("true")) return *out = Json(true), true;
    if (lit("false")) return *out = Json(false), true;
    if (lit("null")) return *out = Json(), true;
    char* end = nullptr;
    double d = std::strtod(s.c_str() + i, &end);
    if (end == s.c_str() + i) return fail("unexpected character");
    i = static_cast<size_t>(end - s.c_str());
    *out = Json(d);
    return true;
  }
};

}  // namespace

void Json::write(std::string* out, int indent, int level) const {
  std::string pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ') : "";
  std::string end = indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * level), ' ') : "";
  switch (type_) {
    case Type::Null:
      *out += "null";
      break;
    case Type::Bool:
      *out += bool_ ? "true" : "false";
      break;
    case Type::Number: {
      char buf[32];
      if (std::isfinite(num_) && num_ == std::floor(num_) && std::fabs(num_) < 1e15)
        snprintf(buf, sizeof(buf), "%.0f", num_);
      else
        snprintf(buf, sizeof(buf), "%.6g", std::isfinite(num_) ? num_ : 0.0);
      *out += buf;
      break;
    }
    case Type::String:
      writeString(out, str_);
      break;
    case Type::Array:
      *out += '[';
      for (size_t k = 0; k < items_.size(); ++k) {
        *out += k ? "," + pad : pad;
        items_[k].write(out, indent, level + 1);
      }
      *out += items_.empty() ? "]" : end + "]";
      break;
    case Type::Object:
      *out += '{';
      for (size_t k = 0; k < order_.size(); ++k) {
        *out += k ? "," + pad : pad;
        writeString(out, order_[k]);
        *out += indent > 0 ? ": " : ":";
        fields_.at(order_[k]).write(out, indent, level + 1);
      }
      *out += order_.empty() ? "}" : end + "}";
      break;
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(&out, indent, 0);
  return out;
}

bool Json::parse(const std::string& text, Json* out, std::string* error) {
  Parser p{text, 0, {}};
  if (!p.value(out, 0)) {
    *error = p.error;
    return false;
  }
  p.ws();
  if (p.i != text.size()) {
    *error = "trailing characters at byte " + std::to_string(p.i);
    return false;
  }
  return true;
}

}  // namespace lanes::topo
