// A small JSON value with a parser and a writer: enough for topology dumps
// and the probe cache (no dependency the GPU machine's image lacks).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lanes::topo {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Json() = default;
  Json(bool b) : type_(Type::Bool), bool_(b) {}
  Json(int v) : type_(Type::Number), num_(v) {}
  Json(long v) : type_(Type::Number), num_(static_cast<double>(v)) {}
  Json(unsigned long v) : type_(Type::Number), num_(static_cast<double>(v)) {}
  Json(unsigned long long v) : type_(Type::Number), num_(static_cast<double>(v)) {}
  Json(double v) : type_(Type::Number), num_(v) {}
  Json(const char* s) : type_(Type::String), str_(s) {}
  Json(std::string s) : type_(Type::String), str_(std::move(s)) {}
  static Json array() {
    Json j;
    j.type_ = Type::Array;
    return j;
  }
  static Json object() {
    Json j;
    j.type_ = Type::Object;
    return j;
  }

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::Null; }
  // Readers return the fallback when the value has another type.
  double num(double fallback = 0) const { return type_ == Type::Number ? num_ : fallback; }
  int integer(int fallback = 0) const {
    // Out of int's range (or NaN) casting is undefined: a corrupt file gets the fallback.
    return type_ == Type::Number && num_ > -2147483649.0 && num_ < 2147483648.0
               ? static_cast<int>(num_)
               : fallback;
  }
  // A byte count: a number in [0, 2^64); anything else (negative, NaN, too
  // large: casting it is undefined) gets the fallback.
  uint64_t bytes(uint64_t fallback = 0) const {
    return type_ == Type::Number && num_ >= 0.0 && num_ < 18446744073709551616.0
               ? static_cast<uint64_t>(num_)
               : fallback;
  }
  bool boolean(bool fallback = false) const { return type_ == Type::Bool ? bool_ : fallback; }
  const std::string& str() const { return str_; }
  const std::vector<Json>& items() const { return items_; }
  // Object member, or a null value when absent.
  const Json& operator[](const std::string& key) const;
  bool has(const std::string& key) const { return fields_.count(key) != 0; }

  Json& set(const std::string& key, Json value);  // object: adds or replaces
  Json& push(Json value);                         // array: appends

  std::string dump(int indent = 2) const;
  // Parses `text`; on failure returns false with *error saying where.
  static bool parse(const std::string& text, Json* out, std::string* error);

 private:
  void write(std::string* out, int indent, int level) const;

  Type type_ = Type::Null;
  bool bool_ = false;
  double num_ = 0;
  std::string str_;
  std::vector<Json> items_;
  std::map<std::string, Json> fields_;
  std::vector<std::string> order_;  // keys in insertion order, for readable dumps
};

}  // namespace lanes::topo
