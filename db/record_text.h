// A record's status as a type, and the one place its stored text is
// decoded: the status column ("ok", "failed", "timeout", "wrong"). The
// values are measure::MeasureStatus's (search/ converts when it makes a
// record), declared here so that db/ needs nothing from measure/. A record's
// metrics are stored as text and decoded by measure::MetricsFromText.
#pragma once

#include <string_view>

#include "common/status.h"

namespace fusetune::db {

enum class RecordStatus { kOk, kFailed, kTimeout, kWrong };
inline constexpr RecordStatus kAllRecordStatuses[] = {RecordStatus::kOk, RecordStatus::kFailed,
                                                      RecordStatus::kTimeout, RecordStatus::kWrong};

// The status column's text (a static string); an unknown text is an
// explained Error.
const char* StatusToText(RecordStatus status);
Result<RecordStatus> StatusFromText(std::string_view text);

}  // namespace fusetune::db
