// An enum's text at the boundaries (the database, the worker pipe, JSON,
// the CLI), from one table of {value, name} pairs: the name of a value and
// the value of a name, so that each enum states its names once and every
// decoder rejects an unknown one the same way.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace fusetune {

template <typename E, size_t N>
struct EnumNames {
  std::array<std::pair<E, const char*>, N> table;

  // `fallback` for a value the table lacks (a cast from a bad integer).
  constexpr const char* Name(E value, const char* fallback = "?") const {
    for (const auto& [v, name] : table)
      if (v == value) return name;
    return fallback;
  }
  std::optional<E> FromName(std::string_view name) const {
    for (const auto& [v, text] : table)
      if (name == text) return v;
    return std::nullopt;
  }
  // The values in the table's order.
  constexpr std::array<E, N> Values() const {
    std::array<E, N> values{};
    for (size_t i = 0; i < N; ++i) values[i] = table[i].first;
    return values;
  }
};

}  // namespace fusetune
