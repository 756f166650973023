#include "db/record_text.h"

#include <fmt/format.h>

namespace fusetune::db {

const char* StatusToText(RecordStatus status) {
  switch (status) {
    case RecordStatus::kOk:
      return "ok";
    case RecordStatus::kFailed:
      return "failed";
    case RecordStatus::kTimeout:
      return "timeout";
    case RecordStatus::kWrong:
      return "wrong";
  }
  return "failed";
}

Result<RecordStatus> StatusFromText(std::string_view text) {
  for (RecordStatus s : kAllRecordStatuses)
    if (text == StatusToText(s)) return s;
  return Error(ErrorCode::kParse,
               fmt::format("unknown record status '{}' (known: ok, failed, timeout, wrong)", text));
}

}  // namespace fusetune::db
