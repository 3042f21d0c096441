// The few XML answers S3 gives (ListObjectsV2, errors, multipart upload
// ids), read by element name: every S3 response element kvfold reads is a
// leaf with text, so no general XML parser is needed.

#ifndef KVFOLD_ARTIFACT_S3_XML_H_
#define KVFOLD_ARTIFACT_S3_XML_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvfold::artifact {

// The text of each <tag>...</tag> in document order, entities decoded.
std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag);
// The first one, or nullopt.
std::optional<std::string> XmlText(std::string_view xml, std::string_view tag);
// `text` with &amp; &lt; &gt; &quot; &apos; and numeric entities replaced.
std::string XmlUnescape(std::string_view text);
// `text` with & < > escaped, for an element's text.
std::string XmlEscape(std::string_view text);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_S3_XML_H_
