// Which statistic of a record's repeats a training sample's time label is.
// A record's seconds are its repeats' median (scaled beside an anchor when
// the tuner timed it so: search/tuner.h). Two tuning jobs of the same
// models order a workload's candidates more alike by their fastest repeats,
// scaled as the records were, than by the records' seconds, and a model
// trained on them picks better top-1 candidates
// (bench/ablation/label_retest.py and docs/COST_MODEL.md, "Test-retest").
// The host's interruptions only ever add time.
//
// Its own header so that the CLI's option and the search's residuals name
// the label without the dataset's loading machinery.
#pragma once

#include "common/enum_names.h"
#include "measure/result.h"

namespace fusetune::cost_model {

enum class TimeLabel { kMedian, kFastestRepeat };
inline constexpr TimeLabel kDefaultTimeLabel = TimeLabel::kFastestRepeat;
inline constexpr EnumNames<TimeLabel, 2> kTimeLabelNames{{{
    {TimeLabel::kMedian, "median"},
    {TimeLabel::kFastestRepeat, "fastest"},
}}};

// The label of a record whose seconds are `recorded` and whose repeats
// `time` summarises: kFastestRepeat scales the fastest repeat as the median
// was scaled (the anchor's factor kept). Records without a fastest repeat
// keep their seconds.
inline double LabelSeconds(double recorded, const measure::TimeStats& time, TimeLabel label) {
  if (label == TimeLabel::kMedian || time.median <= 0 || time.min <= 0) return recorded;
  return recorded * time.min / time.median;
}

// The label a model trained by default learns (kDefaultTimeLabel): what the
// tuner corrects and trains its own model on, so that its samples and the
// database's agree.
inline double DefaultLabelSeconds(double recorded, const measure::TimeStats& time) {
  return LabelSeconds(recorded, time, kDefaultTimeLabel);
}

}  // namespace fusetune::cost_model
